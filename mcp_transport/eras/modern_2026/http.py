"""The 2026-07-28 era over HTTP: stateless requests on /mcp, answered by the era-independent
methods of dispatch.py. The wire rules are in protocol/modern.py; this is the thin I/O around
them (transports/streamable_post.py hands every modern POST to ``post``, as an ``Exchange``).

No session, no event ids, no replay: "A request carrying modern per-request _meta is served
statelessly according to this revision" (spec 2026-07-28 versioning). A reply is plain JSON
unless the method sends something before its result: then it is an SSE stream (started by the
first notification), and the result ends it. ``subscriptions/listen`` replaces the GET stream:
the list-changed and resource-updated notifications reach it through a Redis doorbell from any
process (notify.py rings it).
"""
import asyncio
import collections
import functools
import json
import logging
import weakref
from typing import Awaitable, Protocol

import redis

from ... import auth, logs
from ...methods import dispatch, notify
from . import jobs as modern_jobs, tasks as modern_tasks, rounds
from ...state import metrics, quotas, sessions
from ...running import calls, pipeline, streams
from ...state.bell import doorbell
from ...conf import get_config
from ...connections import keys, redis_failure
from ...methods.context import LOG_LEVELS, ClientCapabilityError
from ...protocol import bounds, modern, tasks_extension
from ...protocol.http import PostAccept
from ...protocol.errors import ErrorCode, ProtocolError
from ...protocol.jsonrpc import Notification, dumps, error_message, notification_message, result_message
from ...methods.registry import registry
from ...methods.specs import UNKNOWN

logger = logging.getLogger(__name__)

SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"),
               (b"x-accel-buffering", b"no")]

#: Defaults of the CACHE_HINTS setting: (ttlMs, cacheScope) per cacheable method. "private"
#: because lists "MAY vary by the authorization presented" (spec 2026-07-28 server/tools).
CACHE_DEFAULTS = {
    "server/discover": (60_000, "private"),
    "tools/list": (60_000, "private"),
    "prompts/list": (60_000, "private"),
    "resources/list": (60_000, "private"),
    "resources/templates/list": (60_000, "private"),
    "resources/read": (0, "private"),
}


def cache_hint(method):
    if method not in CACHE_DEFAULTS:
        return None
    configured = (get_config()["CACHE_HINTS"] or {}).get(method) or {}
    ttl, scope = CACHE_DEFAULTS[method]
    return configured.get("ttlMs", ttl), configured.get("cacheScope", scope)


#: Extensions this era declares, by id (e.g. "io.modelcontextprotocol/tasks"): a function
#: returning the extension's settings object, or None when it has nothing to offer now (the
#: module that implements an extension registers it here, with its methods in METHODS).
EXTENSIONS = {tasks_extension.EXTENSION: modern_tasks.offer}


def capabilities() -> dict:
    """What server/discover declares: the legacy capabilities minus what 2026-07-28 moved out
    (tasks is the io.modelcontextprotocol/tasks extension now), plus the extensions."""
    caps = dispatch.capabilities()
    caps.pop("tasks", None)
    extensions = {name: settings for name, offer in EXTENSIONS.items() if (settings := offer()) is not None}
    if extensions:
        caps["extensions"] = extensions
    return caps


def declares(capability: str) -> bool:
    """Whether ``capabilities()`` has ``capability``, without building them all."""
    if capability == "extensions":
        return any(offer() is not None for offer in EXTENSIONS.values())
    return capability != "tasks" and dispatch.declares(capability)


async def discover(params, call):
    result = {"supportedVersions": list(modern.MODERN_VERSIONS), "capabilities": capabilities()}
    if get_config()["INSTRUCTIONS"]:
        result["instructions"] = get_config()["INSTRUCTIONS"]
    return result


async def tools_list(params, call):
    page = await dispatch.tools_list(params, call)
    # execution.taskSupport left the core schema with the tasks utility (spec 2026-07-28 changelog).
    page["tools"] = [{k: v for k, v in tool.items() if k != "execution"} for tool in page["tools"]]
    return page


#: The methods of this era: everything era-independent in dispatch, less what 2026-07-28
#: removed, plus its own. Other modules (the tasks extension) may add theirs here.
METHODS = dispatch.METHODS.derive(without=modern.REMOVED_METHODS | {name for name in dispatch.METHODS
                                                                     if name.startswith("tasks/")},
                                  handlers={"tools/list": tools_list})
METHODS.method("server/discover")(discover)
METHODS.update(modern_tasks.METHODS)


def spec_for(method):
    """The facts of a method this era serves now, or UnknownMethod (404, -32601)."""
    spec = METHODS.get(method)
    if spec is None:
        raise modern.UnknownMethod(f"Method not found: {method}.")
    if spec.capability == "extensions" and not declares("extensions"):
        raise modern.UnknownMethod(f"Method not found: {method} (no tool of this server runs as a task).")
    if spec.capability is not None and not declares(spec.capability):
        raise modern.UnknownMethod(f"Method not found: {method}.")
    return spec


def handler_for(spec, params: dict):
    """The method's handler, run in a round (MRTR) when it may ask its client something or the
    request continues a round; a call that can do neither (a tool without a context) is awaited
    as it is, without the round's task and settling (a tenth of an echo call's cost)."""
    if spec.round_trip and (spec.may_send(params) or rounds.continues_a_round(params)):
        return functools.partial(rounds.serve, spec.handler, spec.name)  # its handler may ask the client
    return spec.handler


# -- the request ------------------------------------------------------------------------------

class Exchange(Protocol):
    """The HTTP request this era serves, as its transport (transports/streamable_post.py) hands
    it over once Origin, Host, method, token, headers and body are checked: what the request
    says, and how its one response is written."""

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


async def post(exchange: Exchange, message):
    """Serve one modern POST through the request pipeline (running/pipeline.py)."""
    if isinstance(message, Notification):
        # Notifications carry no reply; on HTTP "notifications/cancelled" is neither required nor
        # expected (a closed stream is the cancel).
        return await exchange.send_accepted()
    request = message
    logs.bind_request(request.id)
    principal = exchange.principal
    call = pipeline.begin(request, stateless_session(request.params.get("_meta"), exchange.user_id, principal.key),
                          exchange.headers, principal=principal, user=exchange.user,
                          request_bytes=exchange.body_size)
    responder = ModernResponder(exchange, request, call)
    if request.method == "subscriptions/listen":
        try:
            return await listen(responder)
        except ProtocolError as exc:  # refused before it holds anything
            return await pipeline.refused(request, call, responder, exc, responder.refusal(exc))
    await pipeline.serve(request, call, responder, check=responder.check, admit=responder.admit,
                         scope=exchange.scope, headers=exchange.headers, run=responder.run,
                         refusal=responder.refusal)


class ModernResponder:
    """The pipeline's side of one modern request: its checks, its admission (per caller), its
    refusals (one JSON message, with the status and headers 2026-07-28 gives them), and its run
    once admitted, answered on the request's own response (``ModernReply``)."""

    __slots__ = ("exchange", "request", "call", "meta", "handler")

    def __init__(self, exchange: Exchange, request, call):
        self.exchange, self.request, self.call = exchange, request, call
        self.meta = self.handler = None

    def check_envelope(self):
        """The request's ``_meta`` and headers (spec 2026-07-28 ladder), its client info's size."""
        request, exchange = self.request, self.exchange
        self.meta = modern.check_envelope(request, exchange.headers, METHODS.get(request.method, UNKNOWN).target)
        check_client_info_size(self.meta, exchange.body_size)

    async def check(self):
        """The pipeline's era checks: the envelope, the method (404), the tool's param headers."""
        self.check_envelope()
        self.handler = handler_for(spec_for(self.request.method), self.request.params)
        check_tool_headers(self.request, self.exchange.headers)

    def admit(self, background) -> Awaitable[quotas.Slot]:
        """MAX_CALLS_PER_CALLER: a call counts (its job, a task's too, until it ends)."""
        exchange = self.exchange
        return quotas.admit_caller_call(exchange.principal.key, exchange.client_address(), background)

    def refusal(self, exc: ProtocolError) -> dict:
        return error_reply(self.request.id, exc)

    def wants_stream(self, may_send: bool) -> bool:
        # The reply turns into SSE at the first message sent before the result (ModernReply).
        return may_send

    async def answer(self, request, message, error=None) -> None:
        await self.exchange.send_json(error_status(error) if error else 200, message,
                                      error.asgi_headers() if error else ())

    async def run(self, streamed: bool, background: bool) -> None:
        """Answer the admitted request, or start the task that will (``call.started``: its end
        frees the call's place). ``streamed``: the method may send before its result."""
        request, call = self.request, self.call
        reply = ModernReply(self.exchange, request.id, functools.partial(calls.finished, request, call))
        call.channel = ModernChannel(reply, request.id, self.meta.get(modern.META_LOG_LEVEL))
        call.channel.call = call
        if request.method == "tools/call":
            # "A v1 client may still send task: {ttl, pollInterval} ... The server MUST tolerate it ...
            # AND MUST NOT promote a sync-only tool to a task": the server alone decides (SEP-2663).
            request.params.pop("task", None)
            try:
                created = await start_task(request, call)
            except ProtocolError as exc:
                return await pipeline.refused(request, call, self, exc, self.refusal(exc))
            if created is not None:
                created = modern.stamp(created, dispatch.server_info())
                return await reply.finish(200, result_message(request.id, created))
        if background:
            return self.start(reply, follow_job(reply, request, call))
        if not streamed:
            return await reply.finish(*await answer(request, self.handler, call))
        self.start(reply, run_inline(reply, request, self.handler, call))

    def start(self, reply: "ModernReply", work) -> asyncio.Task:
        """Run ``work`` in a task of the request's own, which frees the call's place at its end
        and, if the client left before the answer, records the call as cancelled."""
        self.call.started = True
        task = self.exchange.run_task(releasing(self.call, guarded(reply, work)))
        # A done callback runs however the task ends, even cancelled before its first step.
        task.add_done_callback(reply.abandoned)
        return task


async def releasing(call, work):
    try:
        await work
    finally:
        await quotas.release_call(call.quota)


async def start_task(request, call):
    """The CreateTaskResult of a call the tasks extension runs as a task, or None."""
    name = request.params.get("name")
    spec = registry.tools.get(name) if isinstance(name, str) else None
    return await modern_tasks.start(spec, request.params, call, request.id) if spec is not None else None


def check_tool_headers(request, headers):
    if request.method != "tools/call" or not isinstance(request.params.get("name"), str):
        return
    spec = registry.tools.get(request.params["name"])
    arguments = request.params.get("arguments")
    if spec is not None and isinstance(arguments, dict):
        modern.check_param_headers(arguments, spec.input_schema, headers)


def check_client_info_size(meta, body_size):
    """MAX_CLIENT_INFO_BYTES, the legacy initialize's bound, for what this era sends with every
    request and a background call keeps in its job's row: 400, -32602 above it. A body no larger
    than the bound cannot hold more, so most requests cost nothing here."""
    limit = get_config()["MAX_CLIENT_INFO_BYTES"]
    if body_size <= limit:
        return
    size = bounds.kept_bytes(meta.get(modern.META_CLIENT_INFO), meta[modern.META_CLIENT_CAPABILITIES])
    if size > limit:
        metrics.incr("limit_refusals:client_info_bytes")
        raise modern.InvalidMeta(f"{modern.META_CLIENT_CAPABILITIES} and {modern.META_CLIENT_INFO} take {size} bytes; "
                                 f"this server keeps at most {limit} per request.")


def stateless_session(meta, user_id, principal="") -> sessions.SessionRecord:
    """What the era-independent handlers read from a session, taken from this request alone:
    "Servers MUST NOT rely on prior requests over the same connection to establish context".
    Made before ``_meta`` is checked (a refused request has its record and span too): what it
    takes from an unchecked one is only what the checks would let through."""
    meta = meta if isinstance(meta, dict) else {}
    info, capabilities = meta.get(modern.META_CLIENT_INFO), meta.get(modern.META_CLIENT_CAPABILITIES)
    version = meta.get(modern.META_PROTOCOL_VERSION)
    return sessions.SessionRecord(
        id="", protocol_version=version if version in modern.MODERN_VERSIONS else "", state="ready",
        user_id=user_id, principal=principal,
        client_info=info if isinstance(info, dict) else {},
        client_capabilities=capabilities if isinstance(capabilities, dict) else {},
        log_level=meta.get(modern.META_LOG_LEVEL) or "debug")


async def answer(request, handler, call):
    """(HTTP status, JSON-RPC reply) of one request."""
    try:
        result = await handler(request.params, call)
    except ProtocolError as exc:
        return error_status(exc), error_reply(request.id, exc)
    except Exception:
        logger.exception("%s failed", request.method)
        return 200, error_message(request.id, ErrorCode.INTERNAL_ERROR, "Internal error.")
    return 200, result_message(request.id, modern.stamp(result, dispatch.server_info(), cache_hint(request.method)))


async def run_inline(reply, request, handler, call):
    """A method that may send before its result. Closing the response stream "MUST be treated
    by the server as cancellation of that request" (spec 2026-07-28 transports): the transport
    cancels this task on http.disconnect, and sync tools see ``ctx.cancelled``."""
    try:
        await reply.finish(*await answer(request, handler, call))
    except asyncio.CancelledError:
        call.channel.cancelled = True
        raise


async def guarded(reply, work):
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
        await reply.finish(503 if unavailable else 500,
                           error_message(reply.request_id, ErrorCode.INTERNAL_ERROR, message))
    finally:
        keepalive.cancel()


async def keep_alive(reply):
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


def error_reply(request_id, exc: ProtocolError) -> dict:
    """"Every error on a well-formed request carries the request id"; resource-not-found is
    -32602 now: 2026 responses "MUST NOT emit -32002"."""
    code = ErrorCode.INVALID_PARAMS if exc.code == ErrorCode.RESOURCE_NOT_FOUND else exc.code
    return error_message(request_id, code, exc.message, exc.data)


class ModernReply:
    """The HTTP response of one modern request: JSON, or SSE from the first message sent before
    the result (so an error raised before anything was sent keeps its own status)."""

    __slots__ = ("exchange", "request_id", "streaming", "done", "last_sent", "finished")

    def __init__(self, exchange: Exchange, request_id, finished=None):
        self.exchange, self.request_id = exchange, request_id
        #: Called with the answer as it goes out: the calls log (running/calls.py).
        self.finished = finished
        self.streaming = self.done = False
        self.last_sent = asyncio.get_running_loop().time()

    async def send(self, message):
        await self._write(sse_frame(message))

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
        """The request's task ended without an answer: the client closed the response, which
        "MUST be treated by the server as cancellation of that request" (spec 2026-07-28
        transports). Its record says cancelled, and its span ends."""
        if not self.done:
            self.done = True
            if self.finished is not None:
                self.finished(None)
                self.finished = None  # it holds the call, and the call holds this reply

    async def finish(self, status, message):
        if self.done:
            return
        if self.finished is not None:
            self.finished(message)
            self.finished = None  # it holds the call, and the call holds this reply
        if not self.streaming and (self.exchange.accept.json or status != 200):
            self.done = True
            return await self.exchange.send_json(status, message)
        await self.send(message)
        self.done = True
        await self.exchange.send({"type": "http.response.body", "body": b"", "more_body": False})


def sse_frame(message) -> bytes:
    # No id: "CL26 #9 removes the Last-Event-ID header and SSE event IDs".
    return b"event: message\ndata: %s\n\n" % dumps(message)


class ModernChannel:
    """What a tool's Context talks to: notifications go on this request's own response."""

    def __init__(self, reply: ModernReply, request_id, log_level):
        self.reply, self.request_id, self.log_level = reply, request_id, log_level
        self.cancelled = False
        #: The multi-round-trip round the handler runs in (rounds.serve sets it).
        self.round = None
        self._call = None
        #: The creation of the one task the call hands its work to (start_task).
        self._handover = None

    @property
    def call(self):
        """The request's dispatch.Call (what a task started from it needs). Held weakly, since
        the call holds its channel: a reference cycle would leave each request's objects to the
        garbage collector (bench/RESULTS.md, issue 19)."""
        return self._call() if self._call is not None else None

    @call.setter
    def call(self, call):
        self._call = weakref.ref(call) if call is not None else None

    async def notify(self, method, params):
        # "The server MUST NOT emit notifications/message for a request that does not include
        # this field" (io.modelcontextprotocol/logLevel).
        if method == "notifications/message" and not self._logs(params):
            return
        await self.reply.send(notification_message(method, params))

    def _logs(self, params) -> bool:
        level = (params or {}).get("level")
        return self.log_level is not None and level in LOG_LEVELS and \
            LOG_LEVELS.index(level) >= LOG_LEVELS.index(self.log_level)

    async def request(self, method, params, key=None, park=True):
        """"The server MUST NOT send independent JSON-RPC requests on this stream": a question
        ends the round with an InputRequiredResult instead (rounds.py)."""
        if self.round is None:
            raise ClientCapabilityError(f"Cannot send {method}: only tools/call, prompts/get and resources/read "
                                        "may ask the client in protocol 2026-07-28.")
        return await self.round.request(method, params, key=key, park=park)

    async def close_stream(self, retry_ms=None):
        return None  # no resumption in this era: the stream stays open until the result

    async def start_task(self, tool, arguments):
        """Context.run_as_task: the CreateTaskResult of ``tool`` run as a task, or -32021.

        A call has one answer, so it hands its work to one task: a second ``run_as_task`` made
        while the first one's task is being created (an ``asyncio.gather``) ends the call with
        that same task; one made after it raises RuntimeError."""
        if self._handover is None:
            self._handover = asyncio.ensure_future(self._create_task(tool, arguments))
        elif self._handover.done():
            raise RuntimeError("This call has already handed its work to a task.")
        return await self._handover  # cancelling the round cancels the creation too

    async def _create_task(self, tool, arguments):
        spec = registry.tools.get(tool)
        if spec is None or not spec.background:
            raise ValueError(f"run_as_task needs a background tool; {tool!r} is not one.")
        if not tasks_extension.declared(self.call.session.client_capabilities):
            raise modern_tasks.missing_extension(f"Tool {tool}")
        spec.bind(arguments)
        return await modern_tasks.submit(spec, arguments, self.call, self.request_id, {})


# -- background tools ---------------------------------------------------------------------------

async def follow_job(reply, request, call):
    """A background tool: a worker runs it and appends what it sends to a stream of its own in
    the event store (jobs.py); this connection relays that stream until its final event, or
    until the tool asks the client something (jobs.py: the round ends, the job waits for
    the retry). A client that closes the response cancels the job."""
    spec = registry.tools[request.params["name"]]
    try:
        outcome = await modern_jobs.call(spec, request.params, call, request.id, call.channel.notify)
    except ProtocolError as exc:
        return await reply.finish(error_status(exc), error_reply(request.id, exc))
    if outcome is None:  # cancelled by someone else (the admin): the call still gets its one answer
        message = error_message(request.id, ErrorCode.INTERNAL_ERROR, "The call was cancelled before it finished.")
    elif "jsonrpc" not in outcome:  # an InputRequiredResult
        message = result_message(request.id, modern.stamp(outcome, dispatch.server_info()))
    elif "result" in outcome:  # the job's answer, under this round's request id
        message = result_message(request.id, modern.stamp(dict(outcome["result"]), dispatch.server_info()))
    else:
        error = outcome.get("error") or {}
        message = error_message(request.id, error.get("code", ErrorCode.INTERNAL_ERROR), error.get("message", ""),
                                error.get("data"))
    await reply.finish(200, message)


# -- subscriptions/listen -----------------------------------------------------------------------

#: Open subscriptions/listen streams of this process, per caller (listen_caller).
_open_listens = collections.Counter()


def listen_caller(exchange: Exchange) -> str:
    """Who a listen counts against: its principal when authorization is on, else its client
    address (TRUSTED_PROXIES honoured), as for MAX_CALLS_PER_CALLER."""
    key = exchange.principal.key
    return f"principal:{key}" if key else f"address:{exchange.client_address()}"


async def _may_hear(message, principal) -> bool:
    """An update of a resource the listener can no longer read (a row become another user's) is not sent."""
    if message["method"] != "notifications/resources/updated":
        return True
    return await notify.may_read(message["params"]["uri"], getattr(principal, "user", None))


async def listen(responder: ModernResponder):
    """"The first message MUST be notifications/subscriptions/acknowledged"; every notification
    after it carries the subscription id (the listen request's id) in its _meta, and only the
    types the client asked for go out.

    A listen holds its filter in this process for up to LISTEN_MAX_SECONDS: its resource
    subscriptions obey the caps of resources/subscribe, and one caller holds at most
    MAX_LISTENS_PER_CALLER open listens here, both checked before anything is held. The cap is
    per process because what it bounds is: the memory of the process holding the streams."""
    request, exchange = responder.request, responder.exchange
    config = get_config()
    responder.check_envelope()
    try:
        honored = modern.honored_filter(request.params.get("notifications"), capabilities(),
                                        config["MAX_SUBSCRIPTIONS_PER_SESSION"], config["MAX_URI_BYTES"])
    except modern.SubscriptionLimit as exc:
        metrics.incr(f"limit_refusals:{exc.limit}")
        raise
    caller, limit = listen_caller(exchange), config["MAX_LISTENS_PER_CALLER"]
    if _open_listens[caller] >= limit:
        metrics.incr("limit_refusals:listens_per_caller")
        raise quotas.LimitReached(f"This client already holds {limit} open listens: close one first.", retry_after=1)
    # No listening to a resource the caller may not read: answered as resources/read answers it.
    await dispatch.require_readable(honored.get("resourceSubscriptions", ()),
                                    dispatch.Call(session=None, user=exchange.user, principal=exchange.principal))
    _open_listens[caller] += 1
    reply = ModernReply(exchange, request.id, functools.partial(calls.finished, request, responder.call))
    task = responder.start(reply, follow_changes(reply, honored, {modern.META_SUBSCRIPTION_ID: request.id},
                                                 exchange.principal))
    task.add_done_callback(lambda _task: _leave_listen(caller))


def _leave_listen(caller) -> None:
    _open_listens[caller] -= 1
    if _open_listens[caller] <= 0:
        del _open_listens[caller]


async def follow_changes(reply, honored, tag, principal=None):
    """Relay changes until the client leaves, LISTEN_MAX_SECONDS pass, or the token it listens
    with expires or is revoked (then end gracefully: the client listens again, perhaps on
    another process, or gets the 401 that sends it for a new token). Subscribed before the
    acknowledgment, so no change made after the client saw it can be missed."""
    limit = get_config()["LISTEN_MAX_SECONDS"]
    loop = asyncio.get_running_loop()
    deadline = None if limit is None else loop.time() + limit
    async with doorbell().listen(keys().listen_bell()) as subscription:
        token_ended = asyncio.Event()
        stop_watching = auth.watch_token(principal, lambda: (token_ended.set(), subscription.wake()))
        try:
            await reply.send(notification_message("notifications/subscriptions/acknowledged",
                                                  {"notifications": honored, "_meta": tag}))
            while not token_ended.is_set() and (deadline is None or loop.time() < deadline):
                rang = await subscription.wait(None if deadline is None else deadline - loop.time())
                if rang is None or rang[0] is None:  # the deadline, the token's end, or subscribed again after a reconnect
                    continue
                message = json.loads(rang[1])
                if modern.wanted(honored, message["method"], message.get("params")) \
                        and await _may_hear(message, principal):
                    params = {**(message.get("params") or {}), "_meta": tag}
                    await reply.send(notification_message(message["method"], params))
        finally:
            stop_watching()
        # Graceful end: "the server SHOULD send {id, result:{resultType:"complete", _meta:{subscriptionId}}}".
        await reply.finish(200, result_message(reply.request_id, {"resultType": "complete", "_meta": tag}))
