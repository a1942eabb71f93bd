"""The Channels shell: HTTP in, protocol core and dispatch, HTTP out. Nothing else.

It subclasses ``AsyncConsumer`` (through endpoint.HttpEndpoint) rather than ``AsyncHttpConsumer``: a streaming ``handle()``
there blocks ``http.disconnect`` until it returns. Streams are written from their own tasks,
so the consumer's dispatch loop stays free to see the client go away.

Order of checks on every request (status codes are part of the contract):
Origin (403) -> Host (400) -> method (405) -> bearer token (401, 403; auth/) -> headers (415,
406, 413) -> body (400 -32700 / -32600) -> era (spec-checklist §3.2 step 4: a 2026-07-28 request
goes to modern_post.py, whose era runs the rest of its ladder) -> session (400 missing, 404 unknown or
another principal's) -> version header (400) -> dispatch.
"""
import asyncio
import logging

from channels.exceptions import StopConsumer
from django.contrib.auth.models import AnonymousUser

from .. import logs
from ..state import control, metrics, rates, sessions
from ..protocol import http, ids, versions
from ..protocol.modern import check_stream_method
from ..protocol.errors import TransportError
from ..storage import get_event_store
from .endpoint import HttpEndpoint, answer_failures
from .streamable_get import StreamGet
from .streamable_post import PostHandling
from .sse_writer import SSE_HEADERS, SseWriter, priming_frame

logger = logging.getLogger(__name__)

#: "respond to requests containing that session ID with HTTP 404 Not Found" (a session of
#: another principal does not exist to this one).
SESSION_NOT_FOUND = "Session not found: it expired or was terminated; initialize a new one."


class McpHttpConsumer(HttpEndpoint):
    """Serves one HTTP request on the MCP endpoint (POST, GET or DELETE)."""

    #: The StreamTail of a GET response, whose claim and subscription must be released.
    tail = None
    #: The session's running background calls, as its read counted them (``open_session``).
    running_calls = None

    async def http_request(self, message):
        if not self.body.add(message):
            return
        await answer_failures(self.handle(self.body.take()), self.send_error, "MCP")
        if not self.tasks:
            raise StopConsumer()

    async def http_disconnect(self, message):
        # Stop writing; the request itself goes on (a disconnect is not a cancel in 2025-11-25).
        for task in self.tasks:
            task.cancel()
        if self.tail is not None:  # a task cancelled before it started never runs its finally
            asyncio.create_task(self.tail.release())
        raise StopConsumer()

    # -- routing ---------------------------------------------------------------------------

    async def handle(self, body: bytes):
        await self.check_request()
        method = self.scope["method"]
        check_stream_method(method, self.headers)
        # Once per process: the control channel, and the housekeeping that flushes the counters
        # (a process serving only JSON replies would otherwise never report its sessions).
        if not control.listening():
            await control.ensure_listening()
        if method == "POST":  # each half is an object of its own (streamable_post.py, streamable_get.py)
            await PostHandling(self).post(body)
        elif method == "GET":
            await StreamGet(self).get()
        else:
            await self.delete()

    def session_id_sent(self) -> str:
        """The request's Mcp-Session-Id, or 400."""
        session_id = self.headers.get("mcp-session-id")
        if session_id is None:
            raise TransportError("Missing Mcp-Session-Id header: send initialize first.")
        return session_id

    async def open_session(self, resume=False, for_call=False, rate=None, initialized=False) -> sessions.SessionRecord:
        """The request's session, or 400 / 404. ``for_call``: the request counts as a call, so
        the read also counts the session's running background calls (``self.running_calls``),
        which its admission needs, and takes a rate limited call's place in its caller's window
        (``rate``, given back if the request goes no further): one round trip for all.
        ``initialized``: the request is notifications/initialized, and the read makes the session
        ready (``load_initialized``)."""
        session_id = self.session_id_sent()
        if not ids.is_session_id(session_id):
            session = None
        elif for_call:
            session, self.running_calls = await sessions.load_for_call(session_id, rate)
        elif initialized:
            session = await sessions.load_initialized(session_id, self.principal.key)
        else:
            session = await (sessions.load_for_resume if resume else sessions.load)(session_id)
        try:
            # A session belongs to its principal: to anyone else it does not exist.
            if session is None or session.principal != self.principal.key:
                # "respond to requests containing that session ID with HTTP 404 Not Found"
                raise TransportError(SESSION_NOT_FOUND, http_status=404)
            self.version = http.request_version(self.headers.get("mcp-protocol-version"), session.protocol_version)
        except TransportError:
            await rates.give_back(rate)
            raise
        logs.bind_session(session.id)
        return session

    @property
    def user(self):
        """The Django user an auth middleware put in the scope; AnonymousUser without one."""
        return self.scope.get("user") or AnonymousUser()

    @property
    def user_id(self):
        user = self.user
        return user.pk if user.is_authenticated else None

    # -- DELETE ------------------------------------------------------------------------------

    async def delete(self):
        """End the session: its check (open, and this principal's) and its close are one round
        trip. "Terminating a session ... closes its open SSE streams, cancels its in-flight work"
        (checklist G2): sessions.close_own() tells every process."""
        session_id = self.session_id_sent()
        http.request_version(self.headers.get("mcp-protocol-version"), "")  # 400 for an unsupported one
        if not ids.is_session_id(session_id) or not await sessions.close_own(
                session_id, self.principal.key, by=(self.principal.key, self.client_address())):
            raise TransportError(SESSION_NOT_FOUND, http_status=404)
        logs.bind_session(session_id)
        await self.send_empty(200)

    # -- responses ---------------------------------------------------------------------------

    async def prime(self, writer, session, stream_key):
        """Append the stream's first event; send it as a priming event to clients that expect one.
        Returns its position, the stream's replay origin."""
        event_id = await get_event_store().append(session.id, stream_key, None)
        if versions.primes_streams(session.protocol_version):
            writer.push(priming_frame(event_id))
        else:
            writer.push(b": open\n\n")  # the first body chunk is what flushes the headers
        return event_id.position

    async def start_sse(self, session_id, stream_key, token=None, run=True, writer=None):
        """Send the SSE response's headers; its writer (a new one, or ``writer``) runs in a task
        of its own (the caller starts it when ``run`` is False)."""
        headers = [*SSE_HEADERS, (b"mcp-session-id", session_id.encode())]
        await self.send({"type": "http.response.start", "status": 200, "headers": headers})
        writer = writer or SseWriter(self.send, session_id, stream_key, self.principal)
        writer.token = token or writer.token
        metrics.incr("sse_streams_opened")
        if run:
            self.run_task(writer.run())
        return writer

    def follow_tail(self, tail, *run_args):
        """Run a stream's tail (streamable_get.StreamTail) on this response; a disconnect
        releases it."""
        self.tail = tail
        self.run_task(tail.run(*run_args))

    async def send_accepted(self):
        """"the server MUST return HTTP status code 202 Accepted with no body"."""
        await self.send_empty(202)
