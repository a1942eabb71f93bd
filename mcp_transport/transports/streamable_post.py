"""A POST on /mcp (``PostHandling``: the consumer hands it its POST requests): a 2026-07-28
request goes to its era (as a ``PostExchange``), an ``initialize`` opens a session, a request
goes to the request pipeline (running/pipeline.py) through ``PostResponder``, a notification or
a response to the server's request is taken in."""
import asyncio
import dataclasses
import logging

import redis

from .. import logs
from ..state import control, sessions
from ..running import pipeline, streams
from ..running.routes import Route
from . import modern_post
from ..state.bell import doorbell
from ..conf import get_config, message_bounds
from ..connections import keys, redis_failure
from ..auth.callers import Caller
from ..protocol import http, ids, jsonrpc
from ..protocol.modern import is_modern
from ..protocol.errors import ProtocolError
from ..protocol.session import SessionState
from ..protocol.jsonrpc import Notification, Request
from ..eras.legacy_2025 import era as era_2025
from ..eras.legacy_2025.era import receive_notification
from .streamable_get import StreamTail

logger = logging.getLogger(__name__)


class PostResponder(era_2025.SessionResponder):
    """The request pipeline's side of a 2025-11-25 POST (running/pipeline.py): a JSON reply, or an
    SSE stream of the call's events, which a client that drops it resumes on any process."""

    __slots__ = ("exchange",)

    def __init__(self, exchange: "PostExchange", session):
        super().__init__(session)
        self.exchange = exchange

    def wants_stream(self, may_send: bool, blocks: bool = False) -> bool:
        return self.exchange.wants_sse(may_send)

    async def open_stream(self, request, call):
        return await streams.open_request_stream(self.session.id, request.id, self._attach)

    async def _attach(self, stream) -> None:
        exchange, session = self.exchange, self.session
        sessions.remember_for_resume(session)
        writer = await exchange.start_sse(session.id, stream.stream_key)
        stream.primed(await exchange.prime(writer, session, stream.stream_key))
        stream.attach(writer)

    async def open_job_stream(self, stream_key):
        """The job's stream, followed as a resumed GET would follow it, once the job is queued."""
        exchange, session = self.exchange, self.session
        claim = control.ReaderClaim(session.id, stream_key)
        sessions.remember_for_resume(session)
        subscription = doorbell().listen(keys().stream_bell(session.id, stream_key))
        confirmed, _ = await asyncio.gather(subscription.open(), claim.acquire())
        writer = await exchange.start_sse(session.id, stream_key, claim.token)
        position = await exchange.prime(writer, session, stream_key)

        async def follow():
            exchange.follow_tail(StreamTail(writer, session.id, position, subscription, claim), confirmed)
        return follow


class PostExchange:
    """A POST as the layers below the shell see it, in either era (``modern_post.Exchange`` for
    2026-07-28, ``PostResponder``'s for 2025-11-25): what the request says, and the consumer's
    ways to answer it, bound once (no layer below this one holds the consumer)."""

    __slots__ = ("headers", "scope", "principal", "user", "user_id", "body_size", "accept", "client_address",
                 "running_calls", "send", "send_json", "send_accepted", "run_task", "start_sse", "prime",
                 "follow_tail")

    def __init__(self, consumer, accept):
        self.headers, self.scope, self.principal = consumer.headers, consumer.scope, consumer.principal
        self.user = user = consumer.user
        self.user_id = user.pk if user.is_authenticated else None
        self.body_size, self.accept = consumer.body.size, accept
        #: The session's running background calls, as its read counted them (None before one).
        self.running_calls = consumer.running_calls
        self.client_address, self.run_task = consumer.client_address, consumer.run_task
        self.send, self.send_json, self.send_accepted = consumer.send, consumer.send_json, consumer.send_accepted
        self.start_sse, self.prime, self.follow_tail = consumer.start_sse, consumer.prime, consumer.follow_tail

    async def send_answer(self, answer: pipeline.Answer, extra_headers=()) -> None:
        """A call's one answer as one JSON message, with the status and headers of its error."""
        error = answer.error
        await self.send_json(error.http_status if error else 200, answer.message,
                             [*extra_headers, *error.asgi_headers()] if error else extra_headers)

    def wants_sse(self, may_send=False) -> bool:
        """SSE when the client accepts it and the handler may send before its result, or the
        client ranks SSE first or accepts nothing else."""
        accept = self.accept
        return accept.sse and (may_send or accept.prefers_sse or not accept.json)


class PostHandling:
    """A POST on /mcp, for the consumer that received it: its checks, then its era's way
    (a 2026-07-28 request, an ``initialize``, or a message of a 2025-11-25 session), each given
    a ``PostExchange``."""

    __slots__ = ("consumer",)

    def __init__(self, consumer):
        self.consumer = consumer

    async def post(self, body):
        consumer = self.consumer
        http.check_content_type(consumer.headers.get("content-type"))
        accept = http.negotiate_post(consumer.headers.get("accept"))
        http.check_body_size(consumer.body.size, get_config()["MAX_REQUEST_BYTES"])
        message = jsonrpc.parse(body, message_bounds())
        if is_modern(message, consumer.headers):  # spec-checklist §3.2, step 4
            return await modern_post.post(PostExchange(consumer, accept), message)
        if "mcp-session-id" not in consumer.headers and isinstance(message, Request) \
                and message.method == "initialize":
            return await initialize(PostExchange(consumer, accept), message)
        is_request = isinstance(message, Request)
        route = caller = rate = None
        if is_request:
            # Its route and caller, made once: a rate limited call's place in its caller's
            # window is taken by the session's read.
            route = Route.of(message, era_2025.RULES.methods)
            caller = Caller.of(consumer.principal, consumer.client_address)
            rate = route.rate_charge(caller) if route.counts_as_call else None
        initialized = isinstance(message, Notification) and message.method == "notifications/initialized"
        session = await consumer.open_session(for_call=route is not None and route.counts_as_call, rate=rate,
                                              initialized=initialized)
        exchange = PostExchange(consumer, accept)  # with the session's running calls its read counted
        if is_request:
            await post_request(exchange, session, message, route, caller, rate)
        elif isinstance(message, Notification):
            await receive_notification(session, message)
            await exchange.send_accepted()
        else:
            await streams.deliver_reply(session.id, {"id": message.id, "result": message.result,
                                                     "error": message.error})
            await exchange.send_accepted()


async def initialize(exchange: PostExchange, request) -> None:
    """Open a session: ``initialize`` goes through the request pipeline like every request, its
    one rule the era's (``take_initialize``); the session is stored once it is taken."""
    session = sessions.SessionRecord(id=ids.new_session_id(), protocol_version="", state=SessionState.NEW.value,
                                     user_id=exchange.user_id, principal=exchange.principal.key,
                                     log_level=get_config()["DEFAULT_LOG_LEVEL"])
    logs.bind_request(request.id)
    call = pipeline.begin(request, session, exchange.headers, principal=exchange.principal, user=exchange.user,
                          request_bytes=exchange.body_size)
    answer = await pipeline.serve(request, call, OpeningResponder(exchange, session))
    if answer.error is not None or "error" in answer.message:
        return await exchange.send_answer(answer)
    logs.bind_session(session.id)
    if not exchange.wants_sse():
        return await exchange.send_answer(answer, [(b"mcp-session-id", session.id.encode())])
    stream = streams.RequestStream(session.id, request.id, ids.new_stream_key())
    writer = await exchange.start_sse(session.id, stream.stream_key)
    await exchange.prime(writer, session, stream.stream_key)
    stream.attach(writer)
    await stream.emit(answer.message, final=True)


class OpeningResponder(PostResponder):
    """The pipeline's side of the POST that opens a session: its answer is one message (JSON, or
    a one-event SSE stream once the session exists), and a refusal keeps its HTTP status
    (429: MAX_SESSIONS_PER_ADDRESS)."""

    #: The session era's rules, except that an error keeps its HTTP status (429 above).
    rules = dataclasses.replace(era_2025.RULES, in_band_errors=False)

    def wants_stream(self, may_send: bool, blocks: bool = False) -> bool:
        return False

    async def keep_session(self) -> None:
        self.session.address = self.exchange.client_address()
        try:
            await sessions.create(self.session)  # 429 past MAX_SESSIONS_PER_ADDRESS
        except redis.RedisError as exc:  # 503, as for any request whose session cannot be read
            logger.exception(redis_failure(exc))
            raise ProtocolError("The session store is unavailable.", http_status=503) from None


async def post_request(exchange: PostExchange, session, request, route, caller, rate=None) -> None:
    logs.bind_request(request.id)
    call = pipeline.begin(request, session, exchange.headers, principal=exchange.principal, user=exchange.user,
                          request_bytes=exchange.body_size, address=session.address, caller=caller, route=route,
                          rate=rate, running_calls=exchange.running_calls)
    answer = await pipeline.serve(request, call, PostResponder(exchange, session), scope=exchange.scope,
                                  headers=exchange.headers)
    if answer is not None:
        await exchange.send_answer(answer)
