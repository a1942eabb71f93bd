"""A process that drains (running/drain.py) waits for its calls and answers the ones its grace
leaves running: the rules alone, then through the pipeline (stdio, whose calls run as HTTP's do).
The processes themselves, SIGTERM and all: tests/integration/test_drain.py."""
import asyncio
import json
from types import SimpleNamespace

import pytest

from mcp_transport.protocol.errors import ErrorCode
from mcp_transport.running import drain
from mcp_transport.transports import stdio

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fresh_drain():
    drain.reset()
    yield
    drain.reset()  # a drain left begun would refuse every later test's requests


def a_call():
    return SimpleNamespace(stopped=False, handling=False, channel=SimpleNamespace(cancelled=False))


async def handler(call, seconds):
    call.handling = True  # as pipeline.respond marks it
    try:
        await asyncio.sleep(seconds)
    finally:
        call.handling = False
    return "answered"


def running(call, seconds):
    task = asyncio.ensure_future(handler(call, seconds))
    drain.track(task, call)
    return task


async def test_settle_waits_for_the_calls_and_stops_those_its_grace_leaves():
    quick, slow = a_call(), a_call()
    quick_task, slow_task = running(quick, 0.05), running(slow, 60)
    await asyncio.sleep(0)
    deadline = drain.begin(seconds=0.5)
    assert drain.active() and drain.calls_running() == 2
    assert await drain.settle(deadline, answer_seconds=5) == 1
    assert quick_task.result() == "answered" and not quick.stopped
    assert slow_task.cancelled() and slow.stopped and slow.channel.cancelled  # the tool's ctx.cancelled
    assert drain.calls_running() == 0


async def test_settle_returns_as_soon_as_the_last_call_answers():
    task = running(a_call(), 0.05)
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await drain.settle(drain.begin(seconds=60), answer_seconds=5) == 0
    assert task.done() and loop.time() - started < 30


async def test_a_call_answering_is_not_stopped():
    """Only a handler is stopped: a call writing its answer at the deadline finishes it."""
    call = a_call()

    async def answering():
        await asyncio.sleep(0.3)  # its handler is done; its answer is on its way
    task = asyncio.ensure_future(answering())
    drain.track(task, call)
    assert await drain.settle(drain.begin(seconds=0), answer_seconds=5) == 0
    assert not call.stopped and task.done() and not task.cancelled()


async def test_what_ends_on_the_drain_is_told_once():
    told = []
    unregister = drain.when_draining(lambda: told.append("listen"))
    drain.when_draining(lambda: told.append("other"))()  # unregistered before
    drain.begin(seconds=1)
    drain.begin(seconds=1)
    unregister()
    assert told == ["listen"]
    drain.when_draining(lambda: told.append("late"))  # once begun: at once
    assert told == ["listen", "late"]


def line(request_id, method, params=None):
    message = {"jsonrpc": "2.0", "method": method, "params": params or {}}
    if request_id is not None:
        message["id"] = request_id
    return json.dumps(message).encode() + b"\n"


async def test_a_call_past_the_grace_is_answered_with_the_error_through_the_pipeline():
    reader, out = asyncio.StreamReader(), []
    reader.feed_data(line(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                            "clientInfo": {"name": "t", "version": "1"}}))
    reader.feed_data(line(None, "notifications/initialized"))
    reader.feed_data(line(2, "tools/call", {"name": "slow_progress", "_meta": {"progressToken": "p"},
                                            "arguments": {"steps": 600, "interval_ms": 100}}))
    serving = asyncio.ensure_future(stdio.serve(reader, out.append))
    while b"notifications/progress" not in b"".join(out):  # the call runs
        await asyncio.sleep(0.05)
    assert await asyncio.wait_for(drain.settle(drain.begin(seconds=0), answer_seconds=5), 30) == 1
    reader.feed_eof()
    await asyncio.wait_for(serving, 30)
    answers = {m.get("id"): m for m in map(json.loads, b"".join(out).splitlines()) if "method" not in m}
    assert answers[2]["error"]["code"] == ErrorCode.SERVER_STOPPING == -32000
    assert "stopped (a restart or a deploy) before this call finished" in answers[2]["error"]["message"]
