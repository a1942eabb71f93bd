"""A POST on /mcp (``PostHandling``: the consumer hands it its POST requests): a 2026-07-28
request goes to its era (as a ``ModernExchange``), an ``initialize`` opens a session, a request
goes to the request pipeline (running/pipeline.py) through ``PostResponder``, a notification or
a response to the server's request is taken in."""
import asyncio
import logging

from .. import logs
from ..state import control, quotas, sessions
from ..running import pipeline, streams
from . import modern_post
from ..state.bell import doorbell
from ..conf import get_config, message_bounds
from ..connections import keys
from ..methods.dispatch import counts_as_call
from ..protocol import http, ids, jsonrpc
from ..protocol.modern import is_modern
from ..protocol.errors import ProtocolError
from ..protocol.jsonrpc import Notification, Request, Response
from ..eras.legacy_2025 import era as era_2025
from ..eras.legacy_2025.era import receive_notification
from .streamable_get import StreamTail

logger = logging.getLogger(__name__)


class PostResponder(era_2025.SessionResponder):
    """The request pipeline's side of a 2025-11-25 POST (running/pipeline.py): a JSON reply, or an
    SSE stream of the call's events, which a client that drops it resumes on any process."""

    __slots__ = ("post", "consumer", "running_calls")

    def __init__(self, post: "PostHandling", session):
        super().__init__(session)
        self.post, self.consumer = post, post.consumer
        self.running_calls = self.consumer.running_calls

    def wants_stream(self, may_send: bool, blocks: bool = False) -> bool:
        return self.post.wants_sse(may_send)

    async def answer(self, request, message, error=None) -> None:
        await self.consumer.send_json(error.http_status if error else 200, message, error.asgi_headers() if error else ())

    async def open_stream(self, request, call):
        return await streams.open_request_stream(self.session.id, request.id, self._attach)

    async def _attach(self, stream) -> None:
        consumer, session = self.consumer, self.session
        sessions.remember_for_resume(session)
        writer = await consumer.start_sse(session.id, stream.stream_key)
        stream.primed(await consumer.prime(writer, session, stream.stream_key))
        stream.attach(writer)

    async def open_job_stream(self, stream_key):
        """The job's stream, followed as a resumed GET would follow it, once the job is queued."""
        consumer, session = self.consumer, self.session
        claim = control.ReaderClaim(session.id, stream_key)
        sessions.remember_for_resume(session)
        subscription = doorbell().listen(keys().stream_bell(session.id, stream_key))
        confirmed, _ = await asyncio.gather(subscription.open(), claim.acquire())
        writer = await consumer.start_sse(session.id, stream_key, claim.token)
        position = await consumer.prime(writer, session, stream_key)

        async def follow():
            consumer.tail = StreamTail(writer, session.id, position, subscription, claim)
            consumer.run_task(consumer.tail.run(confirmed))
        return follow


class ModernExchange:
    """A 2026-07-28 POST as its era sees it (``modern_post.Exchange``): what the request says, and the
    consumer's ways to answer it, bound once (no layer below this one holds the consumer)."""

    __slots__ = ("headers", "scope", "principal", "user", "user_id", "body_size", "accept", "client_address",
                 "send", "send_json", "send_accepted", "run_task")

    def __init__(self, consumer, accept):
        self.headers, self.scope, self.principal = consumer.headers, consumer.scope, consumer.principal
        self.user = user = consumer.user
        self.user_id = user.pk if user.is_authenticated else None
        self.body_size, self.accept = consumer.body.size, accept
        self.client_address, self.run_task = consumer.client_address, consumer.run_task
        self.send, self.send_json, self.send_accepted = consumer.send, consumer.send_json, consumer.send_accepted


class PostHandling:
    """A POST on /mcp, for the consumer that received it (its headers, body, session, response)."""

    __slots__ = ("consumer", "accept")

    def __init__(self, consumer):
        self.consumer, self.accept = consumer, None

    async def post(self, body):
        http.check_content_type(self.consumer.headers.get("content-type"))
        self.accept = http.negotiate_post(self.consumer.headers.get("accept"))
        http.check_body_size(self.consumer.body.size, get_config()["MAX_REQUEST_BYTES"])
        message = jsonrpc.parse(body, message_bounds())
        if is_modern(message, self.consumer.headers):  # spec-checklist §3.2, step 4
            return await modern_post.post(ModernExchange(self.consumer, self.accept), message)
        if "mcp-session-id" not in self.consumer.headers and isinstance(message, Request) \
                and message.method == "initialize":
            return await self.initialize(message)
        is_request = isinstance(message, Request)
        session = await self.consumer.open_session(for_call=is_request and counts_as_call(message))
        if is_request:
            await self.post_request(session, message)
        elif isinstance(message, Notification):
            await self.post_notification(session, message)
        else:
            await self.post_response(session, message)

    async def initialize(self, request):
        consumer = self.consumer
        session = sessions.SessionRecord(id=ids.new_session_id(), protocol_version="", user_id=consumer.user_id,
                                         principal=consumer.principal.key,
                                         log_level=get_config()["DEFAULT_LOG_LEVEL"])
        logs.bind_request(request.id)
        call = pipeline.begin(request, session, consumer.headers, principal=consumer.principal, user=consumer.user,
                              request_bytes=consumer.body.size)
        try:
            version = era_2025.take_initialize(session, request.params)
        except ProtocolError as exc:
            return await pipeline.refused(request, call, PostResponder(self, session), exc)
        session.address = consumer.client_address()
        with pipeline.recording_failure(request, call):  # 429: MAX_SESSIONS_PER_ADDRESS
            await quotas.admit_session(session.address, session.id)
        logs.bind_session(session.id)
        await sessions.create(session)
        reply = era_2025.initialize_reply(request, version)
        pipeline.record(request, call, reply)
        if not self.wants_sse():
            return await consumer.send_json(200, reply, [(b"mcp-session-id", session.id.encode())])
        stream = streams.RequestStream(session.id, request.id, ids.new_stream_key())
        writer = await consumer.start_sse(session.id, stream.stream_key)
        await consumer.prime(writer, session, stream.stream_key)
        stream.attach(writer)
        await stream.emit(reply, final=True)

    def wants_sse(self, may_send=False) -> bool:
        """SSE when the client accepts it and the handler may send before its result, or the
        client ranks SSE first or accepts nothing else."""
        accept = self.accept
        return accept.sse and (may_send or accept.prefers_sse or not accept.json)

    async def post_request(self, session, request):
        logs.bind_request(request.id)
        consumer = self.consumer
        call = pipeline.begin(request, session, consumer.headers, principal=consumer.principal, user=consumer.user,
                              request_bytes=consumer.body.size, address=session.address)
        await pipeline.serve(request, call, PostResponder(self, session), scope=consumer.scope,
                             headers=consumer.headers)

    async def post_notification(self, session, notification):
        await receive_notification(session, notification)
        await self.consumer.send_accepted()

    async def post_response(self, session, response: Response):
        await streams.deliver_reply(session.id, {"id": response.id, "result": response.result,
                                                 "error": response.error})
        await self.consumer.send_accepted()
