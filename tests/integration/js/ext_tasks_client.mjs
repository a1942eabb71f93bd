// The official tasks client library (@modelcontextprotocol/ext-tasks, pinned in package.json), on
// the TypeScript SDK v2 client, as a host such as the Inspector wires it: node ext_tasks_client.mjs
// URL auto|legacy TOOL ARGUMENTS_JSON. "auto" negotiates 2026-07-28 (the tasks extension; the
// library's V2 path needs a raw request path, here one over the client's own transport), "legacy"
// a 2025-11-25 session (the tasks utility). Calls TOOL with a task preference, follows the
// execution to its end and prints one JSON line of what it saw; tests/integration/test_ext_tasks.py
// judges it.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createTaskSessionFromClient, resultFromTaskOutcome } from '@modelcontextprotocol/ext-tasks/client';

const [url, mode, tool, argumentsJson] = process.argv.slice(2);
const clientInfo = { name: 'mcp-transport-ext-tasks-tests', version: '0' };
const clientCapabilities = {};
const client = new Client(clientInfo, { capabilities: clientCapabilities, versionNegotiation: { mode } });
const transport = new StreamableHTTPClientTransport(new URL(url));
await client.connect(transport);

// The library sends V2 task traffic as raw JSON-RPC (the SDK's codecs reject a CreateTaskResult):
// requests with ids of their own on the client's transport, whose answers it takes before the
// SDK client sees them.
const pending = new Map();
let lastRawId = 0;
const sdkOnMessage = transport.onmessage;
transport.onmessage = (message, extra) => {
  const waiting = typeof message.id === 'string' && !('method' in message) ? pending.get(message.id) : undefined;
  if (waiting === undefined) return sdkOnMessage?.(message, extra);
  pending.delete(message.id);
  waiting(message.error ? { kind: 'error', error: message.error } : { kind: 'result', result: message.result });
};
const rawDispatch = (request, options) => new Promise((resolve, reject) => {
  const id = `ext-tasks-${++lastRawId}`;
  pending.set(id, resolve);
  transport.send({ jsonrpc: '2.0', id, ...request }, { headers: options?.context?.headers })
    .catch((error) => { pending.delete(id); reject(error); });
});

const modern = client.getProtocolEra() === 'modern';
const session = createTaskSessionFromClient(client, {
  endpointId: url,
  ...(modern ? {
    rawDispatch,
    v2RequestFraming: { protocolVersion: client.getNegotiatedProtocolVersion(), clientInfo, clientCapabilities },
  } : {}),
});
const statuses = [];
let seen;
try {
  const execution = await session.callTool(tool, JSON.parse(argumentsJson), { task: { preference: 'prefer' } });
  const { outcome } = await execution.settle({ onEvent: (event) => {
    if (event.type === 'task') statuses.push(event.task.status);
  } });
  const result = resultFromTaskOutcome(outcome);
  seen = {
    version: client.getNegotiatedProtocolVersion?.() ?? null,
    extension: client.getServerCapabilities()?.extensions?.['io.modelcontextprotocol/tasks'] ?? null,
    capabilities: session.capabilities,
    kind: execution.kind,
    taskId: execution.handle?.taskId ?? null,
    outcome: outcome.status,
    statuses,
    result,
  };
} catch (error) {
  seen = { error: `${error?.name}: ${error?.message}`, cause: String(error?.cause?.message ?? error?.cause ?? '') };
} finally {
  await session.close();
  await client.close();
}
console.log(JSON.stringify(seen));
