// The official TypeScript SDK v2 client (@modelcontextprotocol/client, pinned in package.json)
// against our server: node ts_client.mjs URL auto|legacy. Prints one JSON line of what it saw;
// tests/integration/test_ts_client.py judges it.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const [url, mode] = process.argv.slice(2);
const client = new Client({ name: 'mcp-transport-tests', version: '0' },
                          { versionNegotiation: { mode } });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const tools = await client.listTools();
const progress = [];
const slow = await client.callTool({ name: 'slow_progress', arguments: { steps: 3, interval_ms: 10 } },
                                   { onprogress: (p) => progress.push(p.progress) });
const echo = await client.callTool({ name: 'echo', arguments: { text: 'Hello, 世界' } });
const resource = await client.readResource({ uri: 'test://static-text' });
console.log(JSON.stringify({
  version: client.getNegotiatedProtocolVersion?.() ?? null,
  tools: tools.tools.map((t) => t.name),
  slow: slow.content[0].text,
  progress,
  echo: echo.structuredContent,
  resource: resource.contents[0].text,
}));
await client.close();
