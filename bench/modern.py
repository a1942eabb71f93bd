#!/usr/bin/env python3
"""mcpbench's scenarios on the stateless 2026-07-28 wire: ``bench/modern.py calls --url ...``.

mcpbench (../shared/bench/mcpbench.py) speaks 2025-11-25 sessions. This runs it unchanged with
its client session replaced: no initialize (one ``server/discover`` instead, which must say
2026-07-28, so a server that is not modern fails here rather than being measured in the old
era), and every request carries ``params._meta`` (protocol version, client capabilities, client
info) and the headers MCP-Protocol-Version, Mcp-Method and Mcp-Name. mcpbench forks its workers
after this module has swapped the class in, so they all speak the new wire.

Side by side with the SDK anchor (which serves the same era on the same endpoint):

    .venv/bin/python bench/side.py --repeat 3 modern calls --tool echo --args '{"text":"hi"}' \
        --clients 16 --seconds 10
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # noqa: E402 -- bench/run.py: where the shared mcpbench lives

# side.py --shared sets it; the default is run.py's (../shared/bench next to the project).
sys.path.insert(0, os.environ.get("MCP_BENCH_SHARED") or str(run.SHARED_DEFAULT))
import mcpbench  # noqa: E402

VERSION = "2026-07-28"
NAME_KEYS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


class ModernSession(mcpbench.Session):
    """A 2026-07-28 client: stateless, everything it needs is in each request."""

    def meta(self):
        return {"io.modelcontextprotocol/protocolVersion": VERSION,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "mcpbench", "version": mcpbench.VERSION}}

    async def initialize(self):
        self.headers["MCP-Protocol-Version"] = VERSION
        out = await self.request("server/discover", {})
        result = (out.msg or {}).get("result")
        if not isinstance(result, dict) or VERSION not in result.get("supportedVersions", ()):
            raise mcpbench.BenchError("init_error", f"server/discover did not offer {VERSION}: {str(out.msg)[:200]}")
        self.negotiated = VERSION
        self.init_notify_status = 202  # nothing to notify in this era
        return result

    async def request(self, method, params=None, **kwargs):
        params = dict(params or {})
        params["_meta"] = {**self.meta(), **params.get("_meta", {})}
        self.headers["Mcp-Method"] = method
        name = params.get(NAME_KEYS.get(method, ""))
        if name is not None:
            self.headers["Mcp-Name"] = name
        else:
            self.headers.pop("Mcp-Name", None)
        return await super().request(method, params, **kwargs)


mcpbench.Session = ModernSession

if __name__ == "__main__":
    sys.exit(mcpbench.main())
