"""The official TypeScript SDK v2 client (`@modelcontextprotocol/client` 2.4.0, pinned in
package.json) against a real daphne process, in both eras: ``versionNegotiation: {mode: "auto"}``
probes server/discover and stays on 2026-07-28 with us; ``"legacy"`` (its default) initializes a
2025-11-25 session. The client runs in node (js/ts_client.mjs) and prints what it saw."""
import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("js") / "ts_client.mjs"
NODE = ROOT / "node_modules" / ".bin" / "node"  # the pinned Node 22 (make test runs npm ci)


def run_client(url, mode):
    node = str(NODE) if NODE.exists() else shutil.which("node")
    if node is None or not (ROOT / "node_modules" / "@modelcontextprotocol" / "client").exists():
        pytest.fail("node_modules is missing: run `make test` (it runs npm ci) or `npm ci`")
    done = subprocess.run([node, str(SCRIPT), url, mode], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mode, version", [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
def test_typescript_v2_client_in_both_eras(mcp_server, mode, version):
    seen = run_client(mcp_server.url, mode)
    assert seen["version"] == version
    assert {"echo", "slow_progress", "test_x_mcp_header"} <= set(seen["tools"])
    assert seen["slow"] == "done 3"
    assert seen["progress"] == [1, 2, 3]
    assert seen["echo"] == {"result": "Hello, 世界"}
    assert seen["resource"] == "This is the content of the static text resource."
