"""SSE streams of a session: writing frames, running a request that answers over SSE, and
the cross-process paths into a running request (client replies, cancellation).

Theory of operation. A POST answered with SSE gets a stream key. Every message of that
request (progress, logs, server-to-client requests, the response) is appended to the event
store first, then pushed to the connection if it is still attached. The request runs in its
own task, so a dropped connection does not stop it: "Disconnection SHOULD NOT be interpreted
as the client cancelling its request." -- spec 2025-11-25 basic/transports. A client that lost
the connection resumes with GET + Last-Event-ID on any process, which replays from the store
and follows the stream's doorbell until the response.
"""
import asyncio
import json
import logging

from . import sessions
from .bell import doorbell
from .conf import get_config
from .connections import async_redis, keys
from .context import ClientCapabilityError, ClientRequestError, ToolCancelled
from .dispatch import dispatch
from .protocol import sse
from .protocol.errors import ErrorCode, ProtocolError
from .protocol.jsonrpc import error_message, notification_message, request_message, result_message
from .storage import get_event_store

logger = logging.getLogger(__name__)

PING = sse.comment("ping")
#: Tasks of requests still running, by (session id, JSON of the request id).
_running = {}
#: Strong references to request tasks, so a dropped connection cannot let them be collected.
_tasks = set()


def event_frame(event_id, message) -> bytes:
    data = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    return sse.encode(sse.SseEvent(id=str(event_id), event="message", data=data))


def priming_frame(event_id) -> bytes:
    """"The server SHOULD immediately send an SSE event consisting of an event ID and an empty
    data field in order to prime the client to reconnect" -- spec 2025-11-25 basic/transports"""
    return sse.encode(sse.SseEvent(id=str(event_id), data="", retry=get_config()["SSE_RETRY_MS"]))


class SseWriter:
    """Sends queued frames on one HTTP response, with keep-alive comments when idle."""

    def __init__(self, send):
        self._send = send
        self._queue = asyncio.Queue()

    def push(self, frame: bytes, last: bool = False) -> None:
        self._queue.put_nowait((frame, last))

    async def run(self) -> None:
        keepalive = get_config()["KEEPALIVE_SECONDS"]
        while True:
            try:
                frame, last = await asyncio.wait_for(self._queue.get(), keepalive)
            except asyncio.TimeoutError:
                frame, last = PING, False
            frame, last = self._coalesce(frame, last)
            await self._send({"type": "http.response.body", "body": frame, "more_body": not last})
            if last:
                return

    def _coalesce(self, frame, last):
        """Join the frames already queued into one write: fewer sends when events come fast."""
        frames = [frame]
        while not last and not self._queue.empty():
            frame, last = self._queue.get_nowait()
            frames.append(frame)
        return b"".join(frames), last


def _request_key(request_id) -> str:
    return json.dumps(request_id)


class RequestStream:
    """One request answered over SSE: its stream in the store and, while attached, its connection.

    It is also the ``channel`` a tool's Context talks to."""

    def __init__(self, session_id: str, request_id, stream_key: str):
        self.session_id = session_id
        self.request_id = request_id
        self.stream_key = stream_key
        self.cancelled = False
        self._writer = None

    def attach(self, writer: SseWriter) -> None:
        self._writer = writer

    async def emit(self, message, final: bool = False):
        event_id = await get_event_store().append(self.session_id, self.stream_key, message, final=final)
        if self._writer is not None:
            self._writer.push(event_frame(event_id, message) if message else b"", last=final)
            if final:
                self._writer = None
        return event_id

    async def notify(self, method: str, params: dict) -> None:
        await self.emit(notification_message(method, params))

    async def close_stream(self, retry_ms=None) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            retry = retry_ms if retry_ms is not None else get_config()["SSE_RETRY_MS"]
            writer.push(sse.retry_frame(retry) if retry is not None else b"", last=True)

    async def request(self, method: str, params: dict) -> dict:
        """Send a server-to-client request on this stream and wait for the reply, which may
        arrive as a POST at any process: it comes back through Redis (``deliver_reply``)."""
        client, names = async_redis(), keys()
        async with client.pipeline(transaction=False) as pipe:
            pipe.incr(names.outbound_ids(self.session_id))
            pipe.expire(names.outbound_ids(self.session_id), sessions.side_key_ttl())
            outbound_id, _ = await pipe.execute()
        reply_key = names.reply(self.session_id, outbound_id)
        async with doorbell().listen(reply_key) as subscription:
            await self.emit(request_message(outbound_id, method, params))
            raw = await _wait_for_reply(client, reply_key, subscription)
        if raw is None:
            await self._give_up(outbound_id, method)
        reply = json.loads(raw)
        if reply.get("error") is not None:
            raise ClientRequestError(method, reply["error"])
        return reply.get("result") or {}

    async def _give_up(self, outbound_id, method):
        # "the sender SHOULD issue a cancellation notification for that request and stop
        # waiting for a response" -- spec 2025-11-25 basic/lifecycle (Timeouts)
        await self.notify("notifications/cancelled", {"requestId": outbound_id, "reason": "timed out"})
        raise ClientRequestError(method, {"code": ErrorCode.INTERNAL_ERROR, "message": "no answer in time"})


class JsonReplyChannel:
    """The channel of a request answered with plain JSON: nothing can precede the result.

    Used only when the client does not accept SSE; progress and logs are dropped, and requests
    to the client fail (the tool gets an error it can report)."""

    cancelled = False

    def __init__(self, request_id):
        self.request_id = request_id

    async def notify(self, method, params):
        return None

    async def request(self, method, params):
        raise ClientCapabilityError(f"Cannot send {method}: the client accepts only a JSON reply.")

    async def close_stream(self, retry_ms=None):
        return None


async def _wait_for_reply(client, reply_key, subscription):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + get_config()["CLIENT_REQUEST_TIMEOUT"]
    while loop.time() < deadline:
        await subscription.wait(min(5.0, max(0.0, deadline - loop.time())))
        raw = await client.getdel(reply_key)  # also the fallback if a doorbell was lost
        if raw is not None:
            return raw
    return None


async def deliver_reply(session_id: str, reply: dict) -> None:
    """A client's answer to one of our requests, handed to whichever process waits for it."""
    names = keys()
    reply_key = names.reply(session_id, reply["id"])
    async with async_redis().pipeline(transaction=False) as pipe:
        pipe.set(reply_key, json.dumps(reply), ex=get_config()["CLIENT_REQUEST_TIMEOUT"] + 60)
        pipe.publish(reply_key, "1")
        await pipe.execute()


# -- running requests and cancellation -------------------------------------------------------

def start(stream: RequestStream, request, call) -> None:
    task = asyncio.create_task(_run(stream, request, call))
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)


async def _run(stream, request, call):
    key = (stream.session_id, _request_key(request.id))
    _running[key] = (stream, asyncio.current_task())
    await _ensure_cancel_listener()
    try:
        message = await _respond(stream, request, call)
    except (asyncio.CancelledError, ToolCancelled):
        if not stream.cancelled:
            raise
        message = None
    finally:
        _running.pop(key, None)
    if stream.cancelled:
        # "Receivers ... SHOULD: Not send a response for the cancelled request." -- spec
        # 2025-11-25 basic/utilities/cancellation. The stream ends with a terminal marker.
        message = None
    await stream.emit(message, final=True)


async def _respond(stream, request, call):
    try:
        return result_message(request.id, await dispatch(request, call))
    except ProtocolError as exc:
        return error_message(request.id, exc.code, exc.message, exc.data)
    except (asyncio.CancelledError, ToolCancelled):
        raise
    except Exception:
        logger.exception("request %s of session %s failed", request.method, stream.session_id)
        return error_message(request.id, ErrorCode.INTERNAL_ERROR, "Internal error.")


async def request_cancel(session_id: str, request_id=None) -> None:
    """Ask whichever process runs the request to stop it; None means every request of the session."""
    payload = {"s": session_id, "r": None if request_id is None else _request_key(request_id)}
    await async_redis().publish(keys().cancel_channel(), json.dumps(payload))


_listeners = {}


async def _ensure_cancel_listener():
    loop = asyncio.get_running_loop()
    if loop not in _listeners:
        subscription = doorbell().listen(keys().cancel_channel())
        _listeners[loop] = subscription
        await subscription.__aenter__()
        loop.create_task(_listen_for_cancels(subscription))


async def _listen_for_cancels(subscription):
    while True:
        received = await subscription.wait(None)
        if received is not None:
            _cancel_local(json.loads(received[1]))


def _cancel_local(payload):
    for (session_id, request_key), (stream, task) in list(_running.items()):
        if session_id == payload["s"] and payload["r"] in (None, request_key):
            stream.cancelled = True
            task.cancel()  # an async tool stops at its next await; a sync one sees ctx.cancelled
