// A host finding and reading MCP Apps as the official packages do it: the TypeScript SDK v2
// client (@modelcontextprotocol/client 2.4.0) declaring the io.modelcontextprotocol/ui extension,
// and the host helpers of @modelcontextprotocol/ext-apps 2.0.4 (its app-bridge entry:
// getToolUiResourceUri, RESOURCE_MIME_TYPE), both pinned in package.json.
// node ts_apps.mjs URL auto|legacy [TOKEN]: lists the tools, reads each tool's view, calls the
// first tool with a view with BOOK_ID's arguments (argv[5]) and prints one JSON line of what it
// saw; tests/integration/test_apps_hosts.py judges it.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { getToolUiResourceUri, RESOURCE_MIME_TYPE } from '@modelcontextprotocol/ext-apps/app-bridge';

const [url, mode, token, bookId] = process.argv.slice(2);
const headers = token ? { Authorization: `Bearer ${token}` } : {};
const client = new Client({ name: 'mcp-transport-apps-tests', version: '0' }, {
  versionNegotiation: { mode },
  capabilities: { extensions: { 'io.modelcontextprotocol/ui': { mimeTypes: [RESOURCE_MIME_TYPE] } } },
});
await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
const seen = {
  version: client.getNegotiatedProtocolVersion?.() ?? null,
  extension: client.getServerCapabilities()?.extensions?.['io.modelcontextprotocol/ui'] ?? null,
  tools: {},
  views: {},
  listed: [],
};
const { tools } = await client.listTools();
for (const tool of tools) {
  const uri = getToolUiResourceUri(tool);
  if (!uri) continue;
  seen.tools[tool.name] = { uri, meta: tool._meta.ui };
  if (seen.views[uri]) continue;
  const read = await client.readResource({ uri });
  const [item] = read.contents;
  seen.views[uri] = { mimeType: item.mimeType, isAppMime: item.mimeType === RESOURCE_MIME_TYPE,
                      meta: item._meta?.ui ?? null, doctype: item.text.slice(0, 15), cacheScope: read.cacheScope ?? null };
}
const { resources } = await client.listResources();
seen.listed = resources.filter((r) => r.uri.startsWith('ui://')).map((r) => ({ uri: r.uri, mimeType: r.mimeType,
                                                                                meta: r._meta?.ui ?? null }));
if (bookId) {
  const result = await client.callTool({ name: 'book_card', arguments: { book_id: Number(bookId) } });
  seen.card = { text: result.content[0].text, structuredContent: result.structuredContent };
}
console.log(JSON.stringify(seen));
await client.close();
