"""The official TypeScript SDK v2 client (`@modelcontextprotocol/client` 2.4.0, pinned in
package.json) against a real daphne process, in both eras: ``versionNegotiation: {mode: "auto"}``
probes server/discover and stays on 2026-07-28 with us; ``"legacy"`` (its default) initializes a
2025-11-25 session. The client runs in node (js/ts_client.mjs) and prints what it saw.

On it, the official tasks client library (`@modelcontextprotocol/ext-tasks` 0.2.2, what the
Inspector builds on; js/ext_tasks_client.mjs): a background tool called with a task preference
runs as a task in both eras (the 2026-07-28 tasks extension, the 2025-11-25 tasks utility) and
settles to its result as the library validates it."""
import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).with_name("js")
NODE = ROOT / "node_modules" / ".bin" / "node"  # the pinned Node 22 (make test runs npm ci)


def run_client(url, mode, script="ts_client.mjs", *arguments):
    node = str(NODE) if NODE.exists() else shutil.which("node")
    if node is None or not (ROOT / "node_modules" / "@modelcontextprotocol" / "ext-tasks").exists():
        pytest.fail("node_modules is missing: run `make test` (it runs npm ci) or `npm ci`")
    done = subprocess.run([node, str(SCRIPTS / script), url, mode, *arguments], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
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



def run_ext_tasks(url, mode, tool, arguments):
    return run_client(url, mode, "ext_tasks_client.mjs", tool, json.dumps(arguments))


@pytest.mark.parametrize("mode, version", [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
def test_ext_tasks_library_runs_a_background_tool_as_a_task(mcp_server, celery_worker, mode, version):
    # Before the inlined result of tasks/get carried resultType "complete", the 2026-07-28 run
    # ended in "TaskFailedError: Protocol value failed schema validation".
    seen = run_ext_tasks(mcp_server.url, mode, "slow_job", {"steps": 3, "interval_ms": 300})
    assert "error" not in seen, seen
    assert seen["version"] == version and seen["capabilities"]["execution"] is True
    if version == "2026-07-28":
        assert seen["extension"] == {}  # any key in it, and the library sees no tasks
    assert seen["kind"] == "task" and seen["taskId"], seen
    assert seen["outcome"] == "completed" and seen["statuses"][-1] == "completed", seen
    assert seen["result"]["content"][0]["text"] == "done 3"


def test_ext_tasks_library_gets_a_plain_result_from_a_tool_without_task_support(mcp_server):
    seen = run_ext_tasks(mcp_server.url, "auto", "echo", {"text": "Hello, 世界"})
    assert "error" not in seen, seen
    assert seen["kind"] == "immediate" and seen["outcome"] == "completed"
    assert seen["result"]["structuredContent"] == {"result": "Hello, 世界"}
