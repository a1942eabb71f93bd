"""The protocol core is standard library only: importing it pulls in no framework or event loop."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ("django", "channels", "redis", "celery", "asyncio")

PROBE = """
import json, sys
before = set(sys.modules)
import {module}
after = set(sys.modules)
print(json.dumps({{"before": sorted(before), "after": sorted(after)}}))
"""


def imported_modules(module):
    proc = subprocess.run([sys.executable, "-c", PROBE.format(module=module)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    return set(result["before"]), set(result["after"])


def top_level(names):
    return {name.partition(".")[0] for name in names}


@pytest.mark.parametrize("module", [
    "mcp_transport",
    "mcp_transport.protocol",
    "mcp_transport.protocol.errors",
    "mcp_transport.protocol.jsonrpc",
    "mcp_transport.protocol.sse",
    "mcp_transport.protocol.http",
    "mcp_transport.protocol.ids",
    "mcp_transport.protocol.versions",
    "mcp_transport.protocol.session",
])
def test_import_pulls_in_nothing_forbidden(module):
    before, after = imported_modules(module)
    assert module in after
    loaded = top_level(after)
    assert not loaded & set(FORBIDDEN), sorted(loaded & set(FORBIDDEN))
    # Everything newly imported is the package itself or the standard library.
    new = top_level(after - before) - {"mcp_transport"}
    assert new <= set(sys.stdlib_module_names), sorted(new - set(sys.stdlib_module_names))


def test_the_probe_would_notice_a_forbidden_import():
    # Guard: the same probe does see asyncio when it is imported.
    before, after = imported_modules("asyncio")
    assert "asyncio" in top_level(after)
