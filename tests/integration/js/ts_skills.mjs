// The TypeScript SDK's skills client (SkillsClient of @modelcontextprotocol/client 2.4.0, pinned in
// package.json) against our server: node ts_skills.mjs URL auto|legacy [TOKEN]. It lists the
// skills, gets each, reads every file of each (the client checks each file's size and sha256 digest
// against the entry, and SKILL.md's frontmatter against the entry's: it throws on any difference)
// and reads each skill's directories. Prints one JSON line of what it saw; tests/integration/
// test_skills.py judges it.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { SkillsClient } from '@modelcontextprotocol/client/ext/skills';

const [url, mode, token] = process.argv.slice(2);
const headers = token ? { Authorization: `Bearer ${token}` } : {};
const client = new Client({ name: 'mcp-transport-skills-tests', version: '0' }, { versionNegotiation: { mode } });
await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
const skills = new SkillsClient(client);
const listing = await skills.list();
const seen = {
  version: client.getNegotiatedProtocolVersion?.() ?? null,
  supported: skills.supported,
  directoryRead: skills.directoryRead,
  ttlMs: listing.ttlMs ?? null,
  cacheScope: listing.cacheScope ?? null,
  invalid: listing.invalid,
  skills: [],
};
for (const entry of listing.skills) {
  const { skill, cacheScope } = await skills.get(entry.uri);
  const root = skill.uri.slice(0, -'/SKILL.md'.length);
  const files = [];
  for (const resource of skill.resources) {
    // By its path in the skill, as a SKILL.md's relative link names it.
    const file = await skills.read(skill, resource.uri.slice(root.length + 1));
    files.push({ uri: file.uri, verified: file.verified, size: file.bytes.byteLength, mimeType: file.mimeType ?? null,
                 frontmatter: file.frontmatter ?? null, startsWith: (file.text ?? '').slice(0, 3) });
  }
  const directories = {};
  for (const directory of [root, ...new Set(skill.resources.map((r) => r.uri.slice(0, r.uri.lastIndexOf('/'))))]) {
    const { resources } = await skills.readDirectory(directory);
    directories[directory] = resources.map((child) => [child.uri, child.mimeType ?? null]);
  }
  seen.skills.push({ uri: entry.uri, frontmatter: entry.frontmatter, getCacheScope: cacheScope ?? null, files,
                     directories });
}
try {
  await skills.get('skill://no-such-skill/SKILL.md');
  seen.unknown = 'answered';
} catch (error) {
  seen.unknown = error.code ?? String(error);
}
console.log(JSON.stringify(seen));
await client.close();
