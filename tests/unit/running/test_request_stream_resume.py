"""RequestStream.resume: the frames a process still has of a stream it writes."""
import asyncio

import pytest

from mcp_transport.running import streams
from mcp_transport.protocol.ids import EventId


class Store:
    """Positions 1-0, 2-0, ... (only what emit needs of a store)."""

    def __init__(self):
        self.appended = 0

    async def append(self, session_id, stream_key, message, *, final=False, data=None):
        self.appended += 1
        return EventId(stream_key, f"{self.appended}-0")


class Writer:
    def __init__(self):
        self.frames, self.closed, self.finished = [], False, False

    def push(self, frame, last=False):
        self.frames.append(frame)
        self.closed = last

    def finish_with_retry(self, retry_ms=None):
        self.finished = True


@pytest.fixture
def stream(monkeypatch):
    store = Store()
    monkeypatch.setattr(streams, "get_event_store", lambda: store)
    stream = streams.RequestStream("s", 1, "abcdef0123456789")
    stream.primed("0-0")
    return stream


def emit(stream, *values, final=False):
    for value in values:
        asyncio.run(stream.emit({"jsonrpc": "2.0", "method": "m", "params": {"v": value}}, final=final))


def test_resume_queues_what_followed_the_position_and_attaches(stream):
    old = Writer()
    stream.attach(old)
    emit(stream, 1, 2, 3)
    new = Writer()
    assert stream.resume("1-0", new) == 2
    assert [frame.split(b"\n")[0] for frame in new.frames] == [b"id: abcdef0123456789.2-0", b"id: abcdef0123456789.3-0"]
    assert old.finished
    emit(stream, 4)
    assert len(old.frames) == 3 and len(new.frames) == 3  # the next event goes to the new writer only


def test_resume_from_the_priming_event_and_from_the_last_one(stream):
    emit(stream, 1, 2)
    assert stream.resume("0-0", Writer()) == 2
    latest = Writer()
    assert stream.resume("2-0", latest) == 0
    assert latest.frames == [b": resumed\n\n"]


def test_resume_declines_what_it_no_longer_has(stream):
    emit(stream, *range(streams.RequestStream.RECENT_FRAMES + 1))
    writer = Writer()
    assert stream.resume("0-0", writer) is None  # the first events were dropped
    assert stream.resume("1-0", writer) is None
    assert stream.resume("99-9", writer) is None
    assert writer.frames == [] and stream._writer is None


def test_replay_size_is_the_bytes_resume_would_queue(stream):
    emit(stream, 1, 2, 3)
    writer = Writer()
    size = stream.replay_size("1-0")
    assert stream.resume("1-0", writer) == 2
    assert size == sum(map(len, writer.frames)) and size > 0
    assert stream.replay_size("3-0") == 0
    assert stream.replay_size("99-0") is None  # not in the recent frames: resume would not either
