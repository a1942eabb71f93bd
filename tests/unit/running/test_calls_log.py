"""running/calls.py: what a finished call's row says, and what the sample keeps, without I/O."""
import asyncio
from collections import OrderedDict

import pytest
from django.conf import settings
from django.db import DataError, OperationalError
from django.test import override_settings

from mcp_transport.methods.dispatch import Call
from mcp_transport.models import McpCall
from mcp_transport.protocol.jsonrpc import Request
from mcp_transport.running import calls
from mcp_transport.state import sessions

Outcome = McpCall.Outcome


def call(session_id="", client="probe"):
    session = sessions.SessionRecord(id=session_id, protocol_version="2026-07-28", state="ready",
                                     client_info={"name": client})
    return Call(session=session, request_bytes=120)


@pytest.mark.parametrize("message, outcome", [
    ({"jsonrpc": "2.0", "id": 1, "result": {"content": []}}, Outcome.OK),
    ({"jsonrpc": "2.0", "id": 1, "result": {"content": [], "isError": True}}, Outcome.TOOL_ERROR),
    ({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "x"}}, Outcome.ERROR),
    ({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "task", "taskId": "t1", "status": "working"}},
     Outcome.BACKGROUND),
    ({"jsonrpc": "2.0", "id": 1, "result": {"task": {"taskId": "t2", "status": "working"}}}, Outcome.BACKGROUND),
    ({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "input_required", "inputRequests": {}}},
     Outcome.INPUT_REQUIRED),
    (None, Outcome.CANCELLED),
])
def test_the_outcome_of_an_answer(message, outcome):
    assert calls.outcome_of(message) == outcome


def test_a_row_names_era_target_sizes_and_the_task_it_created():
    request = Request(id=7, method="tools/call", params={"name": "slow_job", "arguments": {}})
    message = {"jsonrpc": "2.0", "id": 7, "result": {"resultType": "task", "taskId": "job-1", "status": "working"}}
    row = calls.row(request, call(), message)
    assert (row["era"], row["method"], row["target"], row["status"], row["job_id"]) == (
        "2026-07-28", "tools/call", "slow_job", Outcome.BACKGROUND, "job-1")
    assert row["request_bytes"] == 120 and row["request_id"] == "7"
    assert row["response_bytes"] == len(b'{"jsonrpc":"2.0","id":7,"result":{"resultType":"task",'
                                                        b'"taskId":"job-1","status":"working"}}')
    assert row["client_name"] == "probe" and row["session_id"] == ""
    legacy = calls.row(Request(id="a", method="resources/read", params={"uri": "file:///x"}), call("sess"), None)
    assert (legacy["era"], legacy["target"], legacy["session_id"], legacy["request_id"]) == (
        "2025-11-25", "file:///x", "sess", "a")
    assert calls._task_id({"result": {"task": {"taskId": "job-2"}}}) == "job-2"
    polled = calls.row(Request(id=2, method="tasks/get", params={"taskId": "job-3"}), call(), None)
    assert polled["job_id"] == "job-3"
    assert calls._task_id({"result": {"taskId": "not-a-task-result"}}) == ""


def sampled(rate, n=400) -> int:
    added = []
    with override_settings(MCP_TRANSPORT={**settings.MCP_TRANSPORT, "CALL_LOG_SAMPLE": rate, "CALL_LOG_MAX_PER_SECOND": None}):
        original, calls.add = calls.add, added.append
        try:
            for _ in range(n):
                calls.finished(Request(id=1, method="ping", params={}), call(), {"jsonrpc": "2.0", "id": 1, "result": {}})
        finally:
            calls.add = original
    return len(added)


def test_the_sample_keeps_its_share_of_calls():
    assert sampled(0) == 0 and sampled(1) == 400
    assert 100 < sampled(0.5) < 300


def test_a_full_backlog_drops_rows_instead_of_growing(monkeypatch):
    from mcp_transport.state import metrics

    monkeypatch.setattr(calls, "_waiting", [()] * calls.MAX_WAITING)
    before = metrics._pending["calls_log_dropped"]
    calls.add(())
    assert len(calls._waiting) == calls.MAX_WAITING
    assert metrics._pending["calls_log_dropped"] == before + 1


def test_client_text_is_stored_as_every_database_takes_it():
    """PostgreSQL refuses NUL in text and no database takes a lone surrogate: one such call lost
    its whole batch of rows (the fuzz suite's health check saw the traceback on PostgreSQL)."""
    request = Request(id="r\x00", method="tools/call", params={"name": "a\x00b\ud800"})
    row = calls.row(request, call(client="c\x00"), None)
    assert row["target"] == "a\ufffdb?" and row["client_name"] == "c\ufffd" and row["request_id"] == "r\ufffd"
    for value in row.values():
        if isinstance(value, str):
            value.encode("utf-8")  # no lone surrogate left


def test_the_calls_list_clips_what_a_client_sent():
    from mcp_transport.admin.calls import clipped

    assert clipped("echo", 40) == "echo"
    long = clipped("x" * 500 + "<b>", 40)
    assert long.startswith('<span title="' + "x" * 500 + '&lt;b&gt;">') and long.endswith("x" * 39 + "…</span>")


def test_a_process_keeps_at_most_the_cap_of_rows_per_second_for_each_kind(monkeypatch):
    """Making and inserting a row costs about what serving an echo does: at a thousand calls a
    second the log took a fifth of the process. Errors keep a cap of their own, so a flood of
    good calls never hides them (nor a flood of errors the good calls)."""
    from mcp_transport.state import metrics

    added, second = [], [1000.2]
    monkeypatch.setattr(calls, "add", added.append)
    monkeypatch.setattr(calls.time, "monotonic", lambda: second[0])
    monkeypatch.setattr(calls, "_callers", OrderedDict())  # the counts per caller (this process's)
    ok = {"jsonrpc": "2.0", "id": 1, "result": {}}
    failed = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "x"}}
    skipped = metrics._pending["calls_log_skipped"]
    with override_settings(MCP_TRANSPORT={**settings.MCP_TRANSPORT, "CALL_LOG_MAX_PER_SECOND": 3}):
        for message in [ok] * 5 + [failed] * 4:
            calls.finished(Request(id=1, method="ping", params={}), call(), message)
        assert [row[6] for row in added] == [ok] * 3 + [failed] * 3
        assert metrics._pending["calls_log_skipped"] == skipped + 3
        second[0] = 1001.0  # the next second keeps its own rows
        calls.finished(Request(id=1, method="ping", params={}), call(), ok)
        assert len(added) == 7
    with override_settings(MCP_TRANSPORT={**settings.MCP_TRANSPORT, "CALL_LOG_MAX_PER_SECOND": None}):
        for _ in range(10):
            calls.finished(Request(id=1, method="ping", params={}), call(), ok)
        assert len(added) == 17


def test_a_row_names_the_trace_of_the_calls_span():
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    traced = call()
    traced.span = NonRecordingSpan(SpanContext(trace_id=0x4BF92F3577B34DA6A3CE929D0E0E4736, span_id=0xF067AA0BA902B7,
                                               is_remote=False, trace_flags=TraceFlags(1)))
    request = Request(id=1, method="ping", params={})
    assert calls.row(request, traced, None)["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert calls.row(request, call(), None)["trace_id"] == ""  # no span: tracing off


async def test_rows_a_failed_write_could_not_store_wait_for_the_next_one(monkeypatch):
    """A database that fails a batch (down, out of connections) lost the whole batch at once,
    though the log promises to hold up to MAX_WAITING rows through an outage."""
    written = []

    def write(rows):
        if not written:
            written.append(None)
            raise OperationalError("the database is away")
        written.extend(rows)

    monkeypatch.setattr(calls, "_write", write)
    monkeypatch.setattr(calls, "_waiting", ["a", "b"])
    await calls.flush()
    assert calls._waiting == ["a", "b"]
    calls._waiting.append("c")
    await calls.flush()
    assert written[1:] == ["a", "b", "c"] and calls._waiting == []


async def test_a_row_the_database_refuses_costs_only_itself(monkeypatch):
    """Kept for a retry, a refused row would fail every later write and stall the log."""
    written = []

    def write(rows):
        if "bad" in rows:
            raise DataError("value too long")
        written.extend(rows)

    monkeypatch.setattr(calls, "_write", write)
    monkeypatch.setattr(calls, "_waiting", ["a", "bad", "b"])
    await calls.flush()
    assert written == ["a", "b"] and calls._waiting == []


async def test_an_audit_row_is_written_when_handed_over_and_those_that_come_meanwhile_together(monkeypatch):
    """Issue 38: a state-changing call's row waited for the calls log's next batch (up to a
    second), so a daphne killed right after 100 such answers had written 0 of their rows. Now
    the answer waits for its row (calls.Trail), and rows handed over during a write share the
    next one (a group commit), with no timer in between."""
    import threading

    batches, release = [], threading.Event()

    def write(rows):
        batches.append(list(rows))
        if len(batches) == 1:
            release.wait(5)  # a slow database: three more rows come meanwhile

    monkeypatch.setattr(calls, "_write", write)
    first = calls.trail().write("a")
    while not batches:
        await asyncio.sleep(0.001)
    later = [calls.trail().write(row) for row in "bcd"]
    await asyncio.sleep(0.05)
    assert not first.done()  # its answer still waits
    release.set()
    assert await first is True and [await done for done in later] == [True] * 3
    assert batches == [["a"], ["b", "c", "d"]]


async def test_an_audit_row_the_database_cannot_take_now_waits_in_the_backlog_and_the_answer_goes(monkeypatch):
    def down(rows):
        raise OperationalError("the database is away")

    async def idle():
        pass

    monkeypatch.setattr(calls, "_write", down)
    monkeypatch.setattr(calls, "_waiting", [])
    monkeypatch.setattr(calls, "_task", None)
    monkeypatch.setattr(calls, "_run", idle)  # the backlog's writer: not now
    assert await calls.trail().write(("w", True)) is False
    assert calls._waiting == [("w", True)]  # written with the backlog, the last to be dropped
