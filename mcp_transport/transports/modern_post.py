"""A 2026-07-28 POST on /mcp, as HTTP: the era's rules (eras/modern_2026/era.py) and the
request pipeline (running/pipeline.py) decide what is answered; this writes it. A reply is plain
JSON unless the method sends something before its result: then it is an SSE stream (started by
the first notification), and the result ends it. Closing the response "MUST be treated by the
server as cancellation of that request" (spec 2026-07-28 transports): the call's task is the
request's own, cancelled when the client leaves.
"""
import asyncio
import logging
from typing import Protocol

import redis

from .. import auth, logs
from ..connections import redis_failure
from ..conf import get_config
from ..eras.modern_2026 import era
from ..protocol import modern, sse
from ..protocol.errors import ErrorCode, ProtocolError
from ..protocol.http import PostAccept
from ..protocol.jsonrpc import Notification, dumps, error_message
from ..running import pipeline, streams
from .sse_writer import SSE_HEADERS

logger = logging.getLogger(__name__)


class Exchange(Protocol):
    """The HTTP request this era serves, as its transport (streamable_post.py) hands it over once
    Origin, Host, method, token, headers and body are checked: what the request says, and how
    its one response is written."""

    headers: dict
    #: The ASGI scope (its principal's scopes are checked against the target's).
    scope: dict
    principal: auth.Principal
    user: object
    user_id: object
    body_size: int
    accept: PostAccept

    def client_address(self) -> str:
        """The client's address, TRUSTED_PROXIES honoured."""

    async def send(self, message: dict) -> None:
        """Send one ASGI message of the response."""

    async def send_json(self, status: int, message: dict, extra_headers=()) -> None:
        """Send the whole response: one JSON message."""

    async def send_accepted(self) -> None:
        """Send 202 Accepted with no body."""

    def run_task(self, coroutine) -> asyncio.Task:
        """Run ``coroutine`` in a task of the request's own, cancelled if the client leaves."""


async def post(exchange: Exchange, message) -> None:
    """Serve one modern POST through the request pipeline."""
    if isinstance(message, Notification):
        # Notifications carry no reply; on HTTP "notifications/cancelled" is neither required nor
        # expected (a closed stream is the cancel).
        return await exchange.send_accepted()
    request = message
    logs.bind_request(request.id)
    principal = exchange.principal
    session = era.stateless_session(request.params.get("_meta"), exchange.user_id, principal.key)
    call = pipeline.begin(request, session, exchange.headers, principal=principal, user=exchange.user,
                          request_bytes=exchange.body_size, address=exchange.client_address())
    responder = ModernPostResponder(exchange, request)
    answer = await pipeline.serve(request, call, responder, scope=exchange.scope, headers=exchange.headers)
    if answer is not None:
        await responder.reply.finish(answer.message, answer.error)


class ModernPostResponder(era.ModernResponder):
    """The era's responder, answering on the request's own HTTP response (``ModernReply``)."""

    __slots__ = ("exchange",)

    def __init__(self, exchange: Exchange, request):
        super().__init__(request, ModernReply(exchange, request.id), exchange.headers, exchange.body_size)
        self.exchange = exchange

    def wants_stream(self, may_send: bool, blocks: bool = False) -> bool:
        # The reply turns into SSE at the first message sent before the result (ModernReply). A
        # call of sync code runs in the request's own task too: the client's leaving cancels it,
        # and its query with it ("disconnect = cancel").
        return may_send or blocks

    async def relay_job(self, request, call) -> dict:
        try:
            return await super().relay_job(request, call)
        except redis.RedisError as exc:  # the job's stream, read from the event store
            logger.exception(redis_failure(exc))
            raise ProtocolError("The event store is unavailable.", http_status=503) from None

    async def open_stream(self, request, call) -> "ModernStream":
        return ModernStream(self.reply, self.channel(call))


class ModernStream:
    """A streamed 2026-07-28 call (pipeline.CallStream): its reply, run in a task of the
    request's own with keep-alives, which the client's leaving cancels."""

    __slots__ = ("reply", "channel")

    def __init__(self, reply: "ModernReply", channel):
        self.reply, self.channel = reply, channel

    def start(self, work) -> asyncio.Task:
        task = self.reply.exchange.run_task(guarded(self.reply, work))
        task.add_done_callback(self.reply.abandoned)
        return task

    def answers_cancel(self) -> bool:
        # The client closed the response: nobody is left to answer. Sync tools see ctx.cancelled.
        self.channel.cancelled = True
        return False

    async def claim(self) -> bool:
        return not self.reply.done

    async def finish(self, message, error=None) -> None:
        await self.reply.finish(message, error)


async def guarded(reply: "ModernReply", work):
    """Run a streamed reply's work with keep-alives, and give it its one response even when the
    work fails unexpectedly (Redis down: 503, a bug: 500, as JSON-RPC errors with the id)."""
    keepalive = asyncio.create_task(keep_alive(reply))
    try:
        await work
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        unavailable = isinstance(exc, redis.RedisError)
        logger.exception(redis_failure(exc) if unavailable else "a 2026-07-28 request failed")
        message = "The event store is unavailable." if unavailable else "Internal error."
        await reply.finish(error_message(reply.request_id, ErrorCode.INTERNAL_ERROR, message),
                           ProtocolError(message, http_status=503 if unavailable else 500))
    finally:
        keepalive.cancel()


async def keep_alive(reply: "ModernReply"):
    """Keep-alive comment lines are "encouraged" on long-lived streams: a tool that stays silent
    for KEEPALIVE_SECONDS turns its reply into SSE (if the client accepts it) and gets a comment
    every interval, so no proxy drops an idle connection."""
    interval = get_config()["KEEPALIVE_SECONDS"]
    loop = asyncio.get_running_loop()
    while not reply.done:
        await asyncio.sleep(max(0.05, reply.last_sent + interval - loop.time()))
        if loop.time() - reply.last_sent >= interval * 0.99:
            await reply.ping()


def error_status(exc: ProtocolError) -> int:
    """Handler errors go in-band (200), except the ones 2026-07-28 gives a status of their own."""
    if exc.code == ErrorCode.METHOD_NOT_FOUND:
        return 404
    if exc.code in (modern.HEADER_MISMATCH, modern.MISSING_CLIENT_CAPABILITY, modern.UNSUPPORTED_VERSION):
        return 400
    return 200 if exc.http_status == 200 else exc.http_status


class ModernReply:
    """The HTTP response of one modern request: JSON, or SSE from the first message sent before
    the result (so an error raised before anything was sent keeps its own status)."""

    __slots__ = ("exchange", "request_id", "streaming", "done", "last_sent")

    def __init__(self, exchange: Exchange, request_id):
        self.exchange, self.request_id = exchange, request_id
        self.streaming = self.done = False
        self.last_sent = asyncio.get_running_loop().time()

    async def send(self, message):
        await self._write(sse.message_frame(dumps(message)))

    async def ping(self):
        if self.streaming or self.exchange.accept.sse:
            await self._write(streams.PING)

    async def _write(self, chunk):
        if self.done:
            return
        if not self.streaming:
            self.streaming = True
            await self.exchange.send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        self.last_sent = asyncio.get_running_loop().time()
        await self.exchange.send({"type": "http.response.body", "body": chunk, "more_body": True})

    def abandoned(self, _task=None) -> None:
        """The request's task ended without an answer: the client closed the response, and
        nothing more is written on it (the pipeline records the call as cancelled)."""
        self.done = True

    async def finish(self, message, error=None):
        """The request's one answer (``error``: the ProtocolError it says, whose status it keeps
        while nothing was streamed yet)."""
        if self.done:
            return
        status = error_status(error) if error is not None else 200
        if not self.streaming and (self.exchange.accept.json or status != 200):
            self.done = True
            return await self.exchange.send_json(status, message, error.asgi_headers() if error is not None else ())
        await self.send(message)
        self.done = True
        await self.exchange.send({"type": "http.response.body", "body": b"", "more_body": False})
