"""The 2024-11-05 HTTP+SSE transport, for clients that predate Streamable HTTP.

"The server MUST provide two endpoints: 1. An SSE endpoint, for clients to establish a
connection and receive messages from the server 2. A regular HTTP POST endpoint for clients to
send messages to the server. When a client connects, the server MUST send an endpoint event
containing a URI for the client to use for sending messages. All subsequent client messages
MUST be sent as HTTP POST requests to this endpoint. Server messages are sent as SSE message
events, with the message content encoded as JSON in the event data."
-- spec 2024-11-05 basic/transports (HTTP with SSE)

``GET /sse`` opens a session and answers with its stream: first the ``endpoint`` event
(``/messages?session_id=...``), then every message of the session. ``POST /messages`` answers
202 and its reply goes on that stream. Sessions, the event store, dispatch and Celery jobs are
Streamable HTTP's (``session.py``); what the original transport never offered, every event has
an id (a ``Cursor``), so a client that reconnects to ``GET /sse`` with ``Last-Event-ID`` (as
EventSource does by itself) gets the same session and every message it missed, on any process.

Checks, in order: Origin (403), Host (400), method (405), the token when AUTH is on (401/403,
as on /mcp; the pair is one protected resource, the SSE endpoint's URL, on both endpoints), then for GET the Accept header (406), the client's sessions (429,
MAX_SESSIONS_PER_ADDRESS) and Last-Event-ID (400, 404 for a session that is gone or another
principal's); for POST the Content-Type (415), size (413), body (400), ``session_id`` (400
missing, 404 unknown), the scopes of the tool, resource or prompt (403).
"""
import asyncio
import logging
from urllib.parse import parse_qs

from channels.exceptions import StopConsumer
from django.utils.crypto import constant_time_compare, salted_hmac

from .. import logs
from ..state import control, metrics, quotas, sessions
from ..conf import get_config, message_bounds
from ..connections import async_redis, keys
from .sse_writer import SSE_HEADERS, SseWriter
from .endpoint import HttpEndpoint, answer_failures
from ..protocol import http, ids, jsonrpc, sse
from ..protocol.cursor import Cursor
from ..protocol.errors import InvalidRequest, TransportError
from ..protocol.ids import GET_STREAM
from . import message_session

logger = logging.getLogger(__name__)


class _Endpoint(HttpEndpoint):
    """What both endpoints share: their allowed methods, the session of a request, the error replies."""

    methods = ()

    def check_method(self, method: str) -> None:
        if method not in self.methods:
            raise TransportError(f"Method {method} is not allowed here.", http_status=405,
                                 headers=[("allow", ", ".join(self.methods))])

    async def load_session(self, session_id):
        """The open session of this principal with that id; 404 otherwise ("Session not found")."""
        session = await sessions.load(session_id) if session_id and ids.is_session_id(session_id) else None
        if session is None or session.principal != self.principal.key or \
                not await async_redis().exists(keys().opened_streams(session.id)):
            raise TransportError("Session not found: it expired or was closed; connect to the SSE endpoint again.",
                                 http_status=404)
        logs.bind_session(session.id)
        return session

    async def respond(self, handle):
        """Run ``handle()``; a failure before the response started becomes a JSON error reply."""
        await answer_failures(handle(), self.send_error, "HTTP+SSE", logger)


class HeldWriter(SseWriter):
    """An SseWriter that ends only when told to: HTTP+SSE has no polling mode, so
    POLL_AFTER_SECONDS (Streamable HTTP's) does not apply. A process that stops ends it last,
    once its own calls have answered: the answers of the session's calls go out on it, and
    clients of this transport need not reconnect."""

    ends_when_draining = False

    __slots__ = ()

    async def _write_until_last(self):
        loop = asyncio.get_running_loop()
        self._last_sent = loop.time()
        self._arm_keepalive(loop, get_config()["KEEPALIVE_SECONDS"])
        await self._send_until_last(loop, None)


def endpoint_frame(url: str, cursor: Cursor) -> bytes:
    """"When a client connects, the server MUST send an endpoint event"; its id resumes the
    session even before any message, and its retry paces EventSource's reconnection."""
    return sse.encode(sse.SseEvent(event="endpoint", data=url, id=sealed(str(cursor)),
                                   retry=get_config()["SSE_RETRY_MS"]))


def message_frame(message: dict, event_id: str) -> bytes:
    return sse.encode(sse.SseEvent(event="message", data=jsonrpc.dumps(message).decode(), id=sealed(event_id)))


#: The MAC's salt: an event id of this transport names a session and how far it was read.
CURSOR_SALT = "mcp_transport.http_sse.cursor"


def sealed(cursor: str) -> str:
    """An event id only this server makes: the cursor and a keyed MAC of it. With authorization
    off a session id is its session's only credential, and this transport puts it in every
    POST's URL, so in access logs: a resume must present an id the server sent on the stream,
    not one anybody can build from the session id."""
    return f"{cursor}~{salted_hmac(CURSOR_SALT, cursor).hexdigest()[:32]}"


def opened(event_id: str) -> Cursor:
    """The cursor of an id ``sealed`` made, or InvalidRequest (400) for any other."""
    cursor, _, mac = event_id.strip().rpartition("~")
    if not cursor or not constant_time_compare(mac, salted_hmac(CURSOR_SALT, cursor).hexdigest()[:32]):
        raise InvalidRequest("Last-Event-ID is not an event id this server issued.")
    return Cursor.parse(cursor)


class SseConsumer(_Endpoint):
    """``GET /sse``: a new session's stream, or with Last-Event-ID the rest of an existing one."""

    methods = ("GET",)
    task = None

    def __init__(self, messages_route: str = "messages"):
        #: The route of the message endpoint, relative to the application's root.
        self.messages_route = messages_route

    async def http_request(self, message):
        if message.get("more_body"):
            return
        await self.respond(self.open)
        if self.task is None:
            raise StopConsumer()

    async def http_disconnect(self, message):
        # The session stays: its requests go on and a reconnect with Last-Event-ID resumes it.
        if self.task is not None:
            self.task.cancel()
        raise StopConsumer()

    async def open(self):
        headers = await self.check_request()
        http.check_get_accept(headers.get("accept"))
        await control.ensure_listening()
        last_event_id = headers.get("last-event-id")
        if last_event_id:
            cursor = opened(last_event_id)
            session = await self.load_session(cursor.session_id)
        else:
            session, cursor = await message_session.open_session(self.principal, self.client_address(headers))
            logs.bind_session(session.id)
        writer = HeldWriter(self.send, session.id, GET_STREAM, self.principal)
        writer.push(endpoint_frame(self.endpoint_url(session.id), cursor))
        follower = message_session.Follower(cursor, lambda msg, event_id: writer.push(message_frame(msg, event_id)),
                                            is_open=lambda: not writer.closed)
        endpoint_bytes = writer.queued_bytes()
        await follower.start(resumed=bool(last_event_id))  # a replay that cannot be whole is a 400 here
        if last_event_id:
            replayed = writer.queued_bytes() - endpoint_bytes
            try:  # REPLAY_BYTES_PER_CALLER: 429 before the headers, the replay queued and not sent
                await quotas.charge_replay(self.principal.key, self.client_address(headers), replayed)
            except BaseException:
                await follower.subscription.__aexit__(None, None, None)
                raise
        claim = control.ReaderClaim(session.id, GET_STREAM)
        writer.token = claim.token
        headers = [*SSE_HEADERS, (b"mcp-session-id", session.id.encode())]
        await self.send({"type": "http.response.start", "status": 200, "headers": headers})
        metrics.incr("sse_streams_opened")
        if last_event_id:
            metrics.incr_session(session.id, "resumes")
        self.task = asyncio.create_task(self.stream(writer, follower, claim))

    def endpoint_url(self, session_id: str) -> str:
        return f"{self.scope.get('root_path', '')}/{self.messages_route}?session_id={session_id}"

    async def stream(self, writer, follower, claim):
        """Write until the session ends or a newer connection of it takes over (the newest
        reconnect wins: the old TCP connection may linger after a network switch)."""
        following = asyncio.create_task(follower.run())
        try:
            await claim.take_over()
            writing = asyncio.create_task(writer.run())
            await asyncio.wait([writing, following], return_when=asyncio.FIRST_COMPLETED)
            writer.finish()
            await writing
        finally:
            following.cancel()
            await claim.release()


class MessagesConsumer(_Endpoint):
    """``POST /messages?session_id=...``: one client message; 202, its reply on the stream.
    It is part of the SSE endpoint's protected resource: the token is checked for ``/sse``."""

    methods = ("POST",)

    def __init__(self, sse_route: str = "sse"):
        super().__init__()
        self.resource_path = "/" + sse_route.strip("/")

    async def http_request(self, message):
        if not self.body.add(message):
            return
        body = self.body.take()
        await self.respond(lambda: self.post(body))
        raise StopConsumer()

    async def http_disconnect(self, message):
        raise StopConsumer()

    async def post(self, body):
        headers = await self.check_request()
        http.check_content_type(headers.get("content-type"))
        http.check_body_size(self.body.size, get_config()["MAX_REQUEST_BYTES"])
        message = jsonrpc.parse(body, message_bounds())
        session_id = parse_qs(self.scope.get("query_string", b"").decode("latin-1")).get("session_id", [None])[0]
        if session_id is None:
            raise TransportError("Missing session_id: use the endpoint URL the SSE stream sent.")
        session = await self.load_session(session_id)
        await control.ensure_listening()
        await message_session.receive(session, message, self.principal, self.scope, headers)
        # "the server MUST return HTTP status code 202 Accepted" (its answer is on the stream).
        await self.send_empty(202)
