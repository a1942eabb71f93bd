"""The interface of the request pipeline, proven by a transport written in a few dozen lines
(fake_transport.py, the documentation of "how to add a transport"): through it, in both eras,
an inline call, a streamed call with progress, a background job (a real Celery worker) and
errors each get their messages and exactly one answer, of the era's form."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
               "io.modelcontextprotocol/clientCapabilities": {},
               "io.modelcontextprotocol/clientInfo": {"name": "fake", "version": "0"}}


def requests(era):
    def params(progress=None, **fields):
        meta = dict(MODERN_META) if era == "2026-07-28" else {}
        if progress is not None:
            meta["progressToken"] = progress
        return {**fields, "_meta": meta} if meta else fields

    return [("tools/call", params(name="echo", arguments={"text": "hi"})),
            ("tools/call", params("p", name="slow_progress", arguments={"steps": 3, "interval_ms": 10})),
            ("tools/call", params("j", name="slow_job", arguments={"steps": 2, "interval_ms": 10})),
            ("tools/call", params(name="no_such_tool", arguments={})),
            ("tools/call", params(name="test_error_handling", arguments={}))]


def run(era, server_env):
    done = subprocess.run([sys.executable, str(HERE / "fake_transport.py"), era], input=json.dumps(requests(era)),
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, **server_env}, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
def test_a_transport_of_a_few_dozen_lines_serves_every_kind_of_call(era, server_env, celery_worker):
    echo, streamed, job, unknown, failing = run(era, server_env)
    for request_id, sent in enumerate((echo, streamed, job, unknown, failing), 1):
        answers = [message for message in sent if "id" in message and "method" not in message]
        assert answers == [sent[-1]] and answers[0]["id"] == request_id, sent  # exactly one answer, last
    assert echo[-1]["result"]["content"] == [{"type": "text", "text": "hi"}]
    assert [m["params"]["progress"] for m in streamed if m.get("method") == "notifications/progress"] == [1, 2, 3]
    assert "result" in streamed[-1]
    assert [m["params"]["progress"] for m in job if m.get("method") == "notifications/progress"] == [1, 2]
    assert job[-1]["result"]["content"] and not job[-1]["result"].get("isError")
    assert unknown == [{"jsonrpc": "2.0", "id": 4, "error": {"code": -32602, "message": "Unknown tool: no_such_tool."}}]
    assert failing[-1]["result"]["isError"] is True
    if era == "2026-07-28":  # the era's form: every result says its type
        assert {message["result"]["resultType"] for message in (echo, streamed, job) for message in [message[-1]]} \
            == {"complete"}
