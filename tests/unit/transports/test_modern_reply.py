"""The HTTP side of a 2026-07-28 reply (transports/modern_post.py: ModernReply, guarded) against a recording
consumer: one response whatever the work does."""
import asyncio
import json

import pytest
import redis

from mcp_transport.protocol.errors import ProtocolError
from mcp_transport.eras.modern_2026 import methods as modern_methods
from mcp_transport.methods import extensions
from mcp_transport.transports import modern_post as modern
from mcp_transport.protocol.http import PostAccept

pytestmark = pytest.mark.asyncio


class RecordingConsumer:
    def __init__(self, json_ok=True):
        self.accept = PostAccept(json=json_ok, sse=True, prefers_sse=False)
        self.sent = []

    async def send(self, message):
        self.sent.append(message)

    async def send_json(self, status, message, extra_headers=()):
        self.sent.append({"type": "http.response.start", "status": status})
        self.sent.append({"type": "http.response.body", "body": json.dumps(message).encode()})

    @property
    def status(self):
        return self.sent[0]["status"]

    def body(self):
        return b"".join(m.get("body", b"") for m in self.sent[1:])


async def fail(exc):
    raise exc


@pytest.mark.parametrize("exc, status", [(redis.ConnectionError("down"), 503), (KeyError("bug"), 500)])
async def test_work_that_fails_unexpectedly_still_gets_one_error_response_with_its_id(exc, status):
    consumer = RecordingConsumer()
    reply = modern.ModernReply(consumer, 9)
    await modern.guarded(reply, fail(exc))
    assert consumer.status == status
    body = json.loads(consumer.body())
    assert body["id"] == 9 and body["error"]["code"] == -32603
    await reply.finish({"late": True})  # a second answer is never written
    assert len(consumer.sent) == 2


async def test_a_failure_after_streaming_began_ends_the_stream_with_the_error():
    consumer = RecordingConsumer()
    reply = modern.ModernReply(consumer, "r")

    async def work():
        await reply.send({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}})
        raise redis.ConnectionError("down")

    await modern.guarded(reply, work())
    assert consumer.status == 200
    assert consumer.sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    assert b'"id":"r"' in consumer.body() and b"-32603" in consumer.body()


async def test_an_error_before_anything_was_sent_keeps_its_own_status():
    consumer = RecordingConsumer()
    await modern.ModernReply(consumer, 1).finish({"jsonrpc": "2.0", "id": 1, "error": {"code": -32021}},
                                                 ProtocolError("missing", code=-32021, http_status=400))
    assert consumer.status == 400


async def test_a_client_that_accepts_only_sse_gets_its_result_as_an_event():
    consumer = RecordingConsumer(json_ok=False)
    await modern.ModernReply(consumer, 1).finish({"jsonrpc": "2.0", "id": 1, "result": {}})
    assert consumer.status == 200 and consumer.body().startswith(b"event: message\ndata: ")


async def test_cancelling_guarded_work_propagates():
    consumer = RecordingConsumer()
    task = asyncio.ensure_future(modern.guarded(modern.ModernReply(consumer, 1), asyncio.sleep(10)))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert consumer.sent == []


async def test_registered_extensions_are_declared_when_they_offer_something(monkeypatch):
    monkeypatch.setattr(extensions, "DECLARED", dict(extensions.DECLARED))
    extensions.declare("example.com/on", lambda: {"x": 1})
    extensions.declare("example.com/off", lambda: None)
    declared = modern_methods.capabilities()["extensions"]
    assert declared["example.com/on"] == {"x": 1} and "example.com/off" not in declared
