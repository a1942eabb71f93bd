"""RequestStream.notify: a tool goes on while its notifications are being stored, and the
stream still carries everything in the order the tool sent it."""
import asyncio
import json

import pytest

from mcp_transport.protocol.ids import EventId
from mcp_transport.running import streams


class SlowStore:
    """Takes appends in call order (as the Redis store's batcher does) and answers them only
    once ``open`` is set: a store under load."""

    def __init__(self):
        self.order, self.open, self.failing = [], asyncio.Event(), set()

    async def append(self, session_id, stream_key, message, *, final=False, data=None):
        self.order.append(message)
        position = f"{len(self.order)}-0"
        await self.open.wait()
        if message is not None and message.get("params", {}).get("progress") in self.failing:
            raise ConnectionError("Redis went away")
        return EventId(stream_key, position)


class Writer:
    def __init__(self):
        self.frames, self.closed = [], False

    def push(self, frame, last=False):
        self.frames.append(frame)
        self.closed = last


@pytest.fixture
def store(monkeypatch):
    slow = SlowStore()
    monkeypatch.setattr(streams, "get_event_store", lambda: slow)
    return slow


def new_stream():
    stream = streams.RequestStream("s", 1, "abcdef0123456789")
    writer = Writer()
    stream.attach(writer)
    return stream, writer


def progress(stream, step):
    """The tool's ``report_progress``: it must return at once, whatever the store does."""
    return asyncio.wait_for(stream.notify("notifications/progress", {"progressToken": "p", "progress": step}), 1)


def sent(writer):
    return [json.loads(frame.split(b"data: ", 1)[1]) for frame in writer.frames]


async def test_a_notification_does_not_wait_for_the_store(store):
    stream, writer = new_stream()
    await progress(stream, 1)  # the store has not answered yet
    assert writer.frames == []
    store.open.set()
    await stream.settle()
    assert [m["params"]["progress"] for m in sent(writer)] == [1]


async def test_the_result_comes_after_every_notification_sent_before_it(store):
    stream, writer = new_stream()
    for step in (1, 2, 3):
        await progress(stream, step)
    result = asyncio.ensure_future(stream.emit({"jsonrpc": "2.0", "id": 1, "result": {}}, final=True))
    await asyncio.sleep(0)
    store.open.set()
    await result
    assert [m.get("params", {}).get("progress") for m in store.order] == [1, 2, 3, None]
    assert [m.get("params", {}).get("progress", "result") for m in sent(writer)] == [1, 2, 3, "result"]
    assert writer.closed


async def test_at_most_notify_ahead_notifications_are_on_their_way(store):
    stream, _ = new_stream()
    for step in range(1, stream.NOTIFY_AHEAD + 1):
        await progress(stream, step)
    one_more = asyncio.ensure_future(stream.notify("notifications/progress", {"progressToken": "p", "progress": 99}))
    await asyncio.sleep(0.05)
    assert not one_more.done()  # waits for room
    store.open.set()
    await asyncio.wait_for(one_more, 1)
    await stream.settle()
    assert len(store.order) == stream.NOTIFY_AHEAD + 1


async def test_a_failed_notification_is_raised_to_the_tool_and_the_result_still_goes(store):
    stream, writer = new_stream()
    store.failing.add(1)
    await progress(stream, 1)
    store.open.set()
    await asyncio.sleep(0.01)
    with pytest.raises(ConnectionError):
        await progress(stream, 2)
    await stream.emit({"jsonrpc": "2.0", "id": 1, "result": {}}, final=True)
    assert sent(writer)[-1]["id"] == 1 and writer.closed
