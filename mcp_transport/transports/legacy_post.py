"""A POST of the legacy era (2025-11-25, sessions) on /mcp, once ``streamable_post.py`` chose it:
an ``initialize`` opens a session (``OpeningResponder``), a session's request goes to the run
phase (running/pipeline.py) through ``LegacyPostResponder``: a JSON reply, or an SSE stream of
the call's events that a client resumes on any process."""
import asyncio
import dataclasses
import logging

import redis

from .. import logs
from ..state import control, sessions
from ..running import pipeline, streams
from ..state.bell import doorbell
from ..conf import get_config
from ..connections import keys, redis_failure
from ..protocol import ids
from ..protocol.errors import ProtocolError
from ..protocol.session import SessionState
from ..eras.legacy_2025 import era as era_2025
from .post_exchange import PostExchange
from .streamable_get import StreamTail

logger = logging.getLogger(__name__)


class LegacyPostResponder(era_2025.LegacyResponder):
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


class OpeningResponder(LegacyPostResponder):
    """The pipeline's side of the POST that opens a session: its answer is one message (JSON, or
    a one-event SSE stream once the session exists), and a refusal keeps its HTTP status
    (429: MAX_SESSIONS_PER_ADDRESS)."""

    #: The legacy era's rules, except that an error keeps its HTTP status (429 above).
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
    answer = await pipeline.serve(request, call, LegacyPostResponder(exchange, session), scope=exchange.scope,
                                  headers=exchange.headers)
    if answer is not None:
        await exchange.send_answer(answer)
