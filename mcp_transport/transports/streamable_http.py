"""The Channels shell: HTTP in, protocol core and dispatch, HTTP out. Nothing else.

It subclasses ``AsyncConsumer`` rather than ``AsyncHttpConsumer``: a streaming ``handle()``
there blocks ``http.disconnect`` until it returns. Streams are written from their own tasks,
so the consumer's dispatch loop stays free to see the client go away.

Order of checks on every request (status codes are part of the contract):
Origin (403) -> Host (400) -> method (405) -> bearer token (401, 403; auth/) -> headers (415,
406, 413) -> body (400 -32700 / -32600) -> era (spec-checklist §3.2 step 4: a 2026-07-28 request
goes to eras/modern_2026/http.py, which runs the rest of its ladder) -> session (400 missing, 404 unknown or
another principal's) -> version header (400) -> dispatch.
"""
import asyncio
import logging

import redis
from channels.consumer import AsyncConsumer
from channels.exceptions import StopConsumer
from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.contrib.auth.models import AnonymousUser
from django.http.request import split_domain_port, validate_host

from .. import auth, logs, tracing
from ..state import control, metrics, quotas, sessions
from ..running import calls, jobs, streams
from ..eras.modern_2026 import http as modern
from ..state.bell import doorbell
from ..conf import get_config, message_bounds
from ..connections import keys, redis_failure
from ..methods.dispatch import (Call, counts_as_call, dispatch, initialize_result, may_send, runs_in_background,
    target_spec)
from ..protocol import http, ids, jsonrpc, versions
from ..protocol.modern import check_stream_method, is_modern
from ..protocol.errors import ErrorCode, InvalidRequest, ProtocolError, TransportError
from ..protocol.jsonrpc import Notification, Request, Response
from ..protocol.session import SessionState, next_state
from ..methods.registry import registry
from ..storage import UnknownEvent, get_event_store
from ..eras.legacy_2025.session import receive_notification
from .sse_writer import SseWriter, priming_frame

logger = logging.getLogger(__name__)

JSON_HEADERS = [(b"content-type", b"application/json")]
SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"),
               (b"x-accel-buffering", b"no")]


async def answer_failures(work, send_error, endpoint: str, log=logger) -> None:
    """Await ``work``; what it raises becomes the one error reply of every endpoint: a
    ProtocolError as itself, a Redis failure as 503 (logged as what it is: connections.redis_failure), anything else as 500 (and a log record)."""
    try:
        await work
    except ProtocolError as exc:
        await send_error(exc)
    except redis.RedisError as exc:
        log.exception(redis_failure(exc))
        await send_error(ProtocolError("The session store is unavailable.", http_status=503))
    except (OperationalError, InterfaceError) as exc:
        # An outage, not a bug (bench/chaos.py's database cut: every initialize answered 500).
        log.error("the database is unreachable: %s", exc)
        await send_error(ProtocolError("The database is unreachable; try again shortly.", http_status=503))
    except Exception:
        log.exception("the %s endpoint failed", endpoint)
        await send_error(ProtocolError("Internal error.", http_status=500))


def _allowed_hosts():
    hosts = settings.ALLOWED_HOSTS
    if settings.DEBUG and not hosts:
        return [".localhost", "127.0.0.1", "[::1]"]  # as Django's HttpRequest.get_host()
    return hosts


def check_host(host):
    domain, _port = split_domain_port(host or "")
    if not domain or not validate_host(domain, _allowed_hosts()):
        raise TransportError(f"Host {host!r} is not allowed.")


class RequestBody:
    """A request's body as its ``http.request`` messages bring it. Past MAX_REQUEST_BYTES no
    more is kept: the request is refused with what came (``http.check_body_size``)."""

    def __init__(self):
        self.parts, self.size = [], 0

    def add(self, message) -> bool:
        """Keep this message's part; True once the body is complete, or too big to wait for."""
        part = message.get("body", b"")
        self.size += len(part)
        self.parts.append(part)
        return not message.get("more_body") or self.size > get_config()["MAX_REQUEST_BYTES"]

    def take(self) -> bytes:
        body, self.parts = b"".join(self.parts), []  # a held stream keeps no copy of its request
        return body


class McpHttpConsumer(AsyncConsumer):
    """Serves one HTTP request on the MCP endpoint (POST, GET or DELETE)."""

    #: Tasks writing this request's SSE response; the consumer lives until they are done.
    tasks = ()
    response_started = False
    #: The StreamTail of a GET response, whose claim and subscription must be released.
    tail = None
    #: The session's running background calls, as its read counted them (``open_session``).
    running_calls = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.body = RequestBody()

    async def dispatch(self, message):
        # AsyncConsumer.dispatch calls close_old_connections() through sync_to_async before
        # every message: a hop to Django's one sync thread per request. This consumer never uses
        # the ORM on the event loop, and database_sync_to_async closes connections itself.
        await getattr(self, message["type"].replace(".", "_"))(message)

    async def http_request(self, message):
        if not self.body.add(message):
            return
        await answer_failures(self.handle(self.body.take()), self.send_error, "MCP")
        if not self.tasks:
            raise StopConsumer()

    async def send(self, message):
        self.response_started = True
        await super().send(message)

    async def http_disconnect(self, message):
        # Stop writing; the request itself goes on (a disconnect is not a cancel in 2025-11-25).
        for task in self.tasks:
            task.cancel()
        if self.tail is not None:  # a task cancelled before it started never runs its finally
            asyncio.create_task(self.tail.release())
        raise StopConsumer()

    def run_task(self, coroutine):
        self.tasks = (*self.tasks, asyncio.create_task(coroutine))

    # -- routing ---------------------------------------------------------------------------

    async def handle(self, body: bytes):
        self.headers = http.read_headers(self.scope["headers"])
        config = get_config()
        http.check_origin(self.headers.get("origin"), config["ALLOWED_ORIGINS"], config["ALLOW_LOOPBACK_ORIGINS"])
        check_host(self.headers.get("host"))
        method = self.scope["method"]
        http.check_method(method)
        await self.authenticate()
        check_stream_method(method, self.headers)
        # Once per process: the control channel, and the housekeeping that flushes the counters
        # (a process serving only JSON replies would otherwise never report its sessions).
        await control.ensure_listening()
        if method == "POST":
            await self.post(body)
        elif method == "GET":
            await self.get()
        else:
            await self.delete()

    async def authenticate(self):
        """Every request, the resumed GET included: "MCP Servers MUST NOT use sessions for
        authentication" -- spec 2025-11-25 basic/security_best_practices. The principal is at
        ``self.principal`` and ``scope["principal"]``, its Django user at ``scope["user"]``."""
        self.principal = self.scope["principal"] = await auth.authenticate(self.scope, self.headers)
        self.scope["user"] = self.principal.user

    async def open_session(self, resume=False, for_call=False) -> sessions.SessionRecord:
        """The request's session, or 400 / 404. ``for_call``: the request counts as a call, so
        the read also counts the session's running background calls (``self.running_calls``),
        which its admission needs: one round trip for both."""
        session_id = self.headers.get("mcp-session-id")
        if session_id is None:
            raise TransportError("Missing Mcp-Session-Id header: send initialize first.")
        if not ids.is_session_id(session_id):
            session = None
        elif for_call:
            session, self.running_calls = await sessions.load_for_call(session_id)
        else:
            session = await (sessions.load_for_resume if resume else sessions.load)(session_id)
        # A session belongs to its principal: to anyone else it does not exist.
        if session is None or session.principal != self.principal.key:
            # "respond to requests containing that session ID with HTTP 404 Not Found"
            raise TransportError("Session not found: it expired or was terminated; initialize a new one.",
                                 http_status=404)
        self.version = http.request_version(self.headers.get("mcp-protocol-version"), session.protocol_version)
        logs.bind_session(session.id)
        return session

    def client_address(self) -> str:
        """The peer's address, or the client's as a trusted proxy forwarded it (TRUSTED_PROXIES)."""
        peer = self.scope.get("client") or (None,)
        return http.client_address(peer[0], self.headers.get("x-forwarded-for"), get_config()["TRUSTED_PROXIES"])

    @property
    def user(self):
        """The Django user an auth middleware put in the scope; AnonymousUser without one."""
        return self.scope.get("user") or AnonymousUser()

    @property
    def user_id(self):
        user = self.user
        return user.pk if user.is_authenticated else None

    # -- POST ------------------------------------------------------------------------------

    async def post(self, body):
        http.check_content_type(self.headers.get("content-type"))
        self.accept = http.negotiate_post(self.headers.get("accept"))
        http.check_body_size(self.body.size, get_config()["MAX_REQUEST_BYTES"])
        message = jsonrpc.parse(body, message_bounds())
        if is_modern(message, self.headers):  # spec-checklist §3.2, step 4
            return await modern.post(self, message)
        if "mcp-session-id" not in self.headers and isinstance(message, Request) and message.method == "initialize":
            return await self.initialize(message)
        is_request = isinstance(message, Request)
        session = await self.open_session(for_call=is_request and counts_as_call(message))
        if is_request:
            await self.post_request(session, message)
        elif isinstance(message, Notification):
            await self.post_notification(session, message)
        else:
            await self.post_response(session, message)

    async def initialize(self, request):
        params = request.params
        version = versions.negotiate(params.get("protocolVersion"))
        capabilities, client_info = params.get("capabilities"), params.get("clientInfo")
        session = sessions.SessionRecord(
            id=ids.new_session_id(), protocol_version=version, user_id=self.user_id,
            principal=self.principal.key,
            client_info=client_info if isinstance(client_info, dict) else {},
            client_capabilities=capabilities if isinstance(capabilities, dict) else {},
            log_level=get_config()["DEFAULT_LOG_LEVEL"])
        logs.bind_request(request.id)
        too_large = _client_info_error(session)
        if too_large:
            metrics.incr("limit_refusals:client_info_bytes")
            return await self.send_json(200, jsonrpc.error_message(request.id, ErrorCode.INVALID_PARAMS, too_large))
        session.address = self.client_address()
        await quotas.admit_session(session.address, session.id)
        logs.bind_session(session.id)
        await sessions.create(session)
        reply = jsonrpc.result_message(request.id, initialize_result(version))
        if not self.wants_sse():
            return await self.send_json(200, reply, [(b"mcp-session-id", session.id.encode())])
        stream = streams.RequestStream(session.id, request.id, ids.new_stream_key())
        writer = await self.start_sse(session.id, stream.stream_key)
        await self.prime(writer, session, stream.stream_key)
        stream.attach(writer)
        await stream.emit(reply, final=True)

    def wants_sse(self, may_send=False) -> bool:
        """SSE when the client accepts it and the handler may send before its result, or the
        client ranks SSE first or accepts nothing else."""
        accept = self.accept
        return accept.sse and (may_send or accept.prefers_sse or not accept.json)

    async def post_request(self, session, request):
        logs.bind_request(request.id)
        try:
            state = next_state(SessionState(session.state), request.method)
            jsonrpc.progress_token(request.params)  # -32602 before anything is stored under it
        except ProtocolError as exc:
            return await self.send_request_error(request, exc)
        if state.value != session.state:
            await sessions.update(session, state=state.value)
        auth.require_spec_scopes(target_spec(request), self.principal, self.scope, self.headers)  # 403
        call = Call(session=session, user=self.user, principal=self.principal, request_bytes=self.body.size)
        sse = self.wants_sse(may_send(request))
        if counts_as_call(request):  # a background tool's job counts too, until it ends
            try:
                call.quota = await quotas.admit_call(session.id, self.running_calls,
                                                     background=sse and runs_in_background(request, self.principal))
            except ProtocolError as exc:  # 429: the session runs MAX_CALLS_PER_SESSION already
                return await self.send_request_error(request, exc)
        call.span = tracing.start(request, session, self.headers)  # ended in calls.finished
        try:
            if sse:
                # The request's task releases its place, or the job it starts takes it over.
                return await self.respond_sse(session, request, call)
            # A JSON reply has nowhere to put messages sent before the result: they are dropped.
            call.channel = streams.JsonReplyChannel(request.id)
            reply = await self.run_inline(request, call)
        except BaseException:
            if not call.started:
                await quotas.release_call(call.quota)
            raise
        await quotas.release_call(call.quota)
        await self.send_json(200, reply)
        calls.finished(request, call, reply)

    async def send_request_error(self, request, exc: ProtocolError):
        """An error answering ``request`` (its id), with the error's status and headers."""
        headers = [(name.encode(), value.encode()) for name, value in exc.headers]
        await self.send_json(exc.http_status, jsonrpc.error_message(request.id, exc.code, exc.message), headers)

    async def run_inline(self, request, call):
        try:
            return jsonrpc.result_message(request.id, await dispatch(request, call))
        except ProtocolError as exc:
            return jsonrpc.error_message(request.id, exc.code, exc.message, exc.data)
        except Exception:
            logger.exception("%s failed", request.method)
            return jsonrpc.error_message(request.id, ErrorCode.INTERNAL_ERROR, "Internal error.")

    async def respond_sse(self, session, request, call):
        if runs_in_background(request, self.principal):
            try:
                return await self.respond_job(session, request, call.quota, call)
            finally:
                await quotas.release_call(call.quota)  # nothing left to free once its job holds it
        stream = streams.RequestStream(session.id, request.id, ids.new_stream_key())
        call.channel = stream
        sessions.remember_for_resume(session)
        writer = await self.start_sse(session.id, stream.stream_key)
        position, _ = await asyncio.gather(self.prime(writer, session, stream.stream_key),
                                           control.register_call(stream))
        stream.primed(position)
        stream.attach(writer)
        await streams.start(stream, request, call)

    async def respond_job(self, session, request, slot=None, call=None):
        """A background tool: a worker runs it (jobs.py) and appends what it sends to the call's
        stream; this connection follows the stream as a resumed GET would, so a client that
        drops it resumes on any process."""
        stream_key = ids.new_stream_key()
        claim = control.ReaderClaim(session.id, stream_key)
        sessions.remember_for_resume(session)
        subscription = doorbell().listen(keys().stream_bell(session.id, stream_key))
        confirmed, _ = await asyncio.gather(subscription.open(), claim.acquire())
        writer = await self.start_sse(session.id, stream_key, claim.token)
        position = await self.prime(writer, session, stream_key)
        params = request.params
        try:
            job = await jobs.submit(registry.tools[params["name"]], params.get("arguments") or {},
                                    session_id=session.id, request_id=request.id, stream_key=stream_key,
                                    user_id=self.user_id, principal=self.principal.key,
                                    progress_token=jsonrpc.progress_token(params), slot=slot)
            if call is not None:
                calls.finished(request, call, None, status=calls.McpCall.Outcome.BACKGROUND, job_id=job.id)
        except Exception:
            # The stream is primed, so the client may resume it anywhere: it must end with an
            # answer, or every resume would wait for one forever.
            logger.exception("submitting a job of %s failed", params["name"])
            failed = jsonrpc.error_message(request.id, ErrorCode.INTERNAL_ERROR,
                                           f"Tool {params['name']} could not be started.")
            await get_event_store().append(session.id, stream_key, failed, final=True)
        self.tail = StreamTail(writer, session.id, position, subscription, claim)
        self.run_task(self.tail.run(confirmed))

    async def post_notification(self, session, notification):
        await receive_notification(session, notification)
        await self.send_accepted()

    async def post_response(self, session, response: Response):
        await streams.deliver_reply(session.id, {"id": response.id, "result": response.result,
                                                 "error": response.error})
        await self.send_accepted()

    # -- GET: the standalone stream, or a resumed stream -----------------------------------

    async def get(self):
        http.check_get_accept(self.headers.get("accept"))
        last_event_id = self.headers.get("last-event-id")
        event_id = ids.EventId.parse(last_event_id) if last_event_id else None
        stream_key = event_id.stream if event_id else ids.GET_STREAM
        metrics.incr("get_requests")
        if event_id is not None and await self.resume_local(event_id):
            return
        subscription, confirmed, backlog = await self.open_listen_and_replay(stream_key, event_id)
        session = self.session
        claim = control.ReaderClaim(session.id, stream_key)
        # "The server MUST send each of its JSON-RPC messages on only one of the connected
        # streams": a second plain GET gets 409. A resume takes the stream over instead (in the
        # tail, after the headers): the old connection may be a dead one after a network switch.
        if event_id is None and not await claim.acquire():
            await _release(subscription, None)
            raise TransportError("This session already has an open GET stream.", http_status=409)
        writer = SseWriter(self.send, session.id, stream_key, self.principal)
        position = event_id.position if event_id else await self.prime(writer, session, stream_key)
        tail = StreamTail(writer, session.id, position, subscription, claim, take_over=event_id is not None)
        finished = tail.write(backlog)
        if event_id is not None:
            try:  # 429 before the headers: the replay is queued, not sent
                await self.charge_replay(writer.queued_bytes())
            except BaseException:
                await _release(subscription, None)
                raise
            if not finished and not backlog:
                writer.push(streams.RESUMED)
        self.tail = tail
        await self.start_sse(session.id, stream_key, claim.token, run=False, writer=writer)
        # The replay goes out with the headers from this task: its first event does not wait
        # for the writer's task to be scheduled.
        await writer.send_queued()
        self.run_task(writer.run())
        self.run_task(self.tail.run(confirmed, finished))

    async def resume_local(self, event_id) -> bool:
        """Resume a stream that a request running in this process still writes: its recent
        frames go out with the headers and its next ones straight to this connection, with no
        Redis round trip before the first event. False when this process cannot (another one
        runs the request, or the client is further behind than the frames it keeps)."""
        stream = streams.local_streams.get((self.headers.get("mcp-session-id"), event_id.stream))
        if stream is None:
            return False
        session = await self.open_session(resume=True)
        claim = control.ReaderClaim(session.id, event_id.stream)
        writer = SseWriter(self.send, session.id, event_id.stream, self.principal)
        writer.token = claim.token
        size = stream.replay_size(event_id.position)
        if size is None:
            return False
        await self.charge_replay(size)
        replayed = stream.resume(event_id.position, writer)
        if replayed is None:
            return False
        await self.start_sse(session.id, event_id.stream, claim.token, run=False, writer=writer)
        await writer.send_queued()
        metrics.incr_session(session.id, "resumes")
        metrics.incr_session(session.id, "replays")
        metrics.incr_session(session.id, "replayed_events", replayed)
        metrics.incr("replay_hits:memory")
        self.run_task(self.hold_local(writer, claim))
        return True

    async def charge_replay(self, size: int):
        """REPLAY_BYTES_PER_CALLER: 429 with Retry-After once this caller's replays are spent."""
        await quotas.charge_replay(self.principal.key, self.client_address(), size)

    async def hold_local(self, writer, claim):
        """Run a locally resumed stream's writer; other processes' readers of it stop first."""
        metrics.incr("get_resumes")
        await claim.take_over()
        try:
            await writer.run()
        finally:
            await claim.release()

    async def open_listen_and_replay(self, stream_key, event_id):
        """Load the session, subscribe to the stream's doorbell and replay, all at once (one
        round trip of latency). The replay is only sent if the session checks out. It does not
        wait for Redis to confirm the subscription: the tail reads the store once more when it
        is confirmed, so an event appended in between is neither lost nor sent twice."""
        session_id = self.headers.get("mcp-session-id") or ""
        subscription = doorbell().listen(keys().stream_bell(session_id, stream_key))
        opened, confirmed, _, backlog = await asyncio.gather(
            self.open_session(resume=event_id is not None), subscription.open(), control.ensure_listening(),
            self.replay(session_id, event_id), return_exceptions=True)
        for outcome in (opened, confirmed, backlog):  # in this order: 400/404 for the session first
            if isinstance(outcome, BaseException):
                await subscription.__aexit__(None, None, None)
                if outcome is backlog and isinstance(outcome, InvalidRequest):
                    metrics.incr_session(opened.id, "resumes")
                    metrics.incr_session(opened.id, "replay_failures")
                raise outcome
        self.session = opened
        if event_id is not None:
            metrics.incr_session(opened.id, "resumes")
            metrics.incr_session(opened.id, "replays")
            metrics.incr_session(opened.id, "replayed_events", len(backlog))
        return subscription, confirmed, backlog

    async def replay(self, session_id, event_id):
        if event_id is None:
            return []
        try:
            # The store counts replay_hits:<source> and replay_failures:<reason> itself.
            return await get_event_store().replay_after(session_id, event_id)
        except UnknownEvent:
            # Not 404: "When a client receives HTTP 404 ... it MUST start a new session."
            raise InvalidRequest("Last-Event-ID names no event this session can replay: "
                                 "it is unknown or no longer kept.") from None

    # -- DELETE ------------------------------------------------------------------------------

    async def delete(self):
        session = await self.open_session()
        # "Terminating a session ... closes its open SSE streams, cancels its in-flight work"
        # (checklist G2): sessions.close() tells every process.
        await sessions.close(session.id, "deleted")
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

    async def send_json(self, status, message, extra_headers=()):
        body = jsonrpc.dumps(message)
        headers = [*JSON_HEADERS, (b"content-length", str(len(body)).encode()), *extra_headers]
        await self.send({"type": "http.response.start", "status": status, "headers": headers})
        await self.send({"type": "http.response.body", "body": body})

    async def send_accepted(self):
        """"the server MUST return HTTP status code 202 Accepted with no body"."""
        await self.send_empty(202)

    async def send_empty(self, status):
        await self.send({"type": "http.response.start", "status": status, "headers": [(b"content-length", b"0")]})
        await self.send({"type": "http.response.body", "body": b""})

    async def send_error(self, exc: ProtocolError):
        if self.response_started:
            # An SSE response failed after its headers went out: end it; the client resumes.
            for task in self.tasks:
                task.cancel()
            return await super().send({"type": "http.response.body", "body": b"", "more_body": False})
        status = exc.http_status if exc.http_status != 200 else 400
        extra = [(name.encode(), value.encode()) for name, value in exc.headers]
        await self.send_json(status, jsonrpc.error_message(None, exc.code, exc.message, exc.data), extra)


def _client_info_error(session) -> str:
    """Why the client's capabilities and info are too large to keep with the session, or ""."""
    limit = get_config()["MAX_CLIENT_INFO_BYTES"]
    size = len(jsonrpc.dumps(session.client_capabilities)) + len(jsonrpc.dumps(session.client_info))
    if size <= limit:
        return ""
    return f"capabilities and clientInfo take {size} bytes; this server keeps at most {limit} per session."


async def _release(subscription, claim):
    await subscription.__aexit__(None, None, None)
    if claim is not None:
        await claim.release()


class StreamTail:
    """Writes a GET response: the replayed backlog, then live events until the stream's final
    event (a resumed POST stream), a takeover, the session's end, or the client's disconnect.

    Whenever the doorbell stays silent, it keeps its claim on the stream alive, reads the store
    anyway (a lost doorbell delays an event, never loses it) and checks that the request behind
    a POST stream still has a live process (else it answers it with an error)."""

    __slots__ = ("writer", "session_id", "stream_key", "position", "subscription", "claim", "take_over")

    def __init__(self, writer, session_id, position, subscription, claim, take_over=False):
        self.writer, self.session_id, self.stream_key = writer, session_id, writer.stream_key
        self.position, self.subscription, self.claim = position, subscription, claim
        self.take_over = take_over

    async def run(self, confirmed, finished=False):
        """Follow the stream once the caller has queued its replay (``finished``: it ended it).

        A follower that loses its source (Redis gone for longer than REDIS_OUTAGE_TOLERANCE,
        the database with it) ends the connection with a ``retry``, not the stream: the client
        resumes from its last event, here or on another process. Left running, its writer would
        send keep-alives for ever on a stream that no longer moves."""
        try:
            if self.take_over:  # the backlog is on its way; now stop whoever else reads this stream
                metrics.incr("get_resumes")
                await self.claim.take_over()
            if finished:
                return
            await self.wait_confirmed(confirmed)
            if not self.write(await get_event_store().read_after(self.session_id, self.stream_key, self.position)):
                await self.follow()
        except Exception:
            logger.warning("following stream %s failed; the client resumes it after a retry", self.stream_key,
                           exc_info=True)
            metrics.incr("followers_lost")
            self.writer.finish_with_retry()
        finally:
            await self.release()

    @staticmethod
    async def wait_confirmed(confirmed):
        """Until Redis confirmed the doorbell's subscription; a confirmation that is late (a
        stall) only delays the events the quiet reads find anyway (``follow``)."""
        try:
            await asyncio.wait_for(asyncio.shield(confirmed), 5)
        except TimeoutError:
            logger.info("the doorbell's subscription is not confirmed yet; following by reads")

    async def release(self):
        """Give up the doorbell and the claim on the stream; safe to call twice. A claim Redis
        cannot release now lapses on its own (its ttl)."""
        subscription, self.subscription = self.subscription, None
        if subscription is not None:
            try:
                await _release(subscription, self.claim)
            except redis.RedisError:
                logger.info("releasing the claim on stream %s failed; it lapses", self.stream_key)

    def write(self, events) -> bool:
        """Queue events; True once the final one is queued (the response is then complete)."""
        for event in events:
            self.position = event.id.position
            if event.final:
                self.writer.finish(streams.event_frame(event.id, event.message) if event.message else b"")
                return True
            if event.message is not None:
                self.writer.push(streams.event_frame(event.id, event.message))
        return False

    async def follow(self):
        store, wait = get_event_store(), self.quiet_interval()
        while not self.writer.closed:
            if await self.subscription.wait(wait) is None and not await self.on_quiet():
                return
            if self.write(await store.read_after(self.session_id, self.stream_key, self.position)):
                return

    def quiet_interval(self):
        config = get_config()
        if self.stream_key == ids.GET_STREAM:
            return config["KEEPALIVE_SECONDS"]
        return min(config["KEEPALIVE_SECONDS"], config["HEARTBEAT_SECONDS"])

    async def on_quiet(self) -> bool:
        """Housekeeping when nothing rang; False when this connection must end."""
        if not await self.claim.extend():
            self.writer.finish_with_retry()  # taken over by a newer resume
            return False
        if self.stream_key != ids.GET_STREAM:
            await streams.answer_orphan(self.session_id, self.stream_key)
        return True
