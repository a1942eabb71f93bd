// The TypeScript SDK 1.x SSEClientTransport against our GET /sse + POST /messages, through a TCP
// proxy the Python test controls on stdin: "drop" cuts every connection and refuses new ones,
// "restore <port>" accepts again, forwarding to <port> (another server process, if it likes).
// Prints one JSON object per line on stdout for the test to read.
//
//   node sse_client.mjs <server port> <tool> <arguments JSON> [stock|resuming]
//
// "resuming" gives the transport the fetch of docs/http-sse.md: SSEClientTransport 1.x replaces
// the headers EventSource reconnects with, Last-Event-ID among them, so that fetch puts it back.
import net from "node:net";
import readline from "node:readline";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";

const [port, tool, args, mode = "stock"] = process.argv.slice(2);
const say = (event) => process.stdout.write(JSON.stringify(event) + "\n");

let upstreamPort = Number(port);
let refusing = false;
const pairs = new Set();
const proxy = net.createServer((downstream) => {
  if (refusing) {
    downstream.destroy();
    return;
  }
  const upstream = net.connect(upstreamPort, "127.0.0.1");
  const pair = [downstream, upstream];
  pairs.add(pair);
  const close = () => {
    downstream.destroy();
    upstream.destroy();
    pairs.delete(pair);
  };
  for (const socket of pair) {
    socket.on("error", close);
    socket.on("close", close);
  }
  downstream.pipe(upstream);
  upstream.pipe(downstream);
});
await new Promise((resolve) => proxy.listen(0, "127.0.0.1", resolve));

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  const [command, argument] = line.trim().split(" ");
  if (command === "drop") {
    refusing = true;
    for (const pair of pairs) pair.forEach((socket) => socket.destroy());
    pairs.clear();
    say({ event: "dropped" });
  } else if (command === "restore") {
    upstreamPort = Number(argument || upstreamPort);
    refusing = false;
    say({ event: "restored" });
  }
});

// --- as in docs/http-sse.md ---
let lastEventId;
async function resumingFetch(url, init) {
  const headers = new Headers(init?.headers);
  if (lastEventId) headers.set("Last-Event-ID", lastEventId);
  const response = await fetch(url, { ...init, headers });
  if (!response.body) return response;
  // Remember the id of each event once it is complete (at its blank line), as EventSource does.
  const decoder = new TextDecoder();
  let buffer = "";
  let pendingId;
  const tap = new TransformStream({
    transform(chunk, controller) {
      buffer += decoder.decode(chunk, { stream: true });
      const lines = buffer.split(/\r\n|\r|\n/);
      buffer = lines.pop();
      for (const line of lines) {
        if (line.startsWith("id:")) pendingId = line.slice(3).replace(/^ /, "");
        else if (line === "" && pendingId !== undefined) [lastEventId, pendingId] = [pendingId, undefined];
      }
      controller.enqueue(chunk);
    },
  });
  return new Response(response.body.pipeThrough(tap), { status: response.status, headers: response.headers });
}
// --- end ---

const url = new URL(`http://127.0.0.1:${proxy.address().port}/sse`);
const transport = new SSEClientTransport(url, mode === "resuming" ? { eventSourceInit: { fetch: resumingFetch } } : {});
const client = new Client({ name: "ts-sdk-sse-test", version: "1.0.0" });
client.onerror = (error) => say({ event: "error", message: String(error) });
await client.connect(transport);
// What reached the transport, in order. The SDK runs notification handlers a tick later than it
// handles responses, so progress that arrives in one chunk with its call's response (a replay)
// reaches the transport but not onprogress ("unknown token"): the test reads it here.
const delivered = [];
const onmessage = transport.onmessage;
transport.onmessage = (message, extra) => {
  delivered.push(message.method === "notifications/progress" ? message.params.progress : message.id);
  onmessage(message, extra);
};
const sessionId = new URL(transport._endpoint).searchParams.get("session_id");
say({ event: "connected", sessionId, serverVersion: client.getServerVersion() });

const tools = await client.listTools();
say({ event: "tools", names: tools.tools.map((t) => t.name) });

const progress = [];
const result = await client.callTool({ name: tool, arguments: JSON.parse(args) }, undefined, {
  onprogress: (p) => {
    progress.push(p.progress);
    say({ event: "progress", progress: p.progress });
  },
  timeout: 120000,
  resetTimeoutOnProgress: true,
});
say({ event: "result", progress, delivered, result });
await client.close();
proxy.close();
process.exit(0);
