"""The modern era (2026-07-28): stateless requests answered by the era-independent methods of dispatch.py.
The wire rules are in protocol/modern.py; this is what the era says of a request, whatever
carries it: its checks (the ``_meta`` ladder, the method, the tool's param headers), its methods,
the form of its answers, and what a tool's Context talks to. How the answers reach the client
(JSON, or SSE from the first message sent before the result) is the transport's
(transports/modern_post.py); admission, running, release and the record are the request
pipeline's (running/pipeline.py).

No session, no event ids, no replay: "A request carrying modern per-request _meta is served
statelessly according to this revision" (spec 2026-07-28 versioning).
"""
import asyncio
import functools
import weakref

from ...conf import get_config
from ...methods import discovery, dispatch
from ...methods.context import LOG_LEVELS, ClientCapabilityError
from ...methods.registry import registry
from ...methods.specs import UNKNOWN
from ...protocol import bounds, modern, tasks_extension
from ...protocol.errors import ErrorCode, ProtocolError
from ...protocol.jsonrpc import error_message, notification_message, result_message
from ...running.pipeline import EraRules
from ...state import metrics, sessions
from . import jobs as modern_jobs, tasks as modern_tasks, rounds
from .methods import METHODS, cache_hint, declares

__all__ = ["METHODS", "RULES", "ModernResponder", "ModernChannel", "stateless_session", "error_reply"]


def served(spec, method: str):
    """``spec`` (the method's facts in this era's table, ``specs.UNKNOWN`` for none) if this era
    serves the method now, else UnknownMethod (404, -32601)."""
    if spec is UNKNOWN:
        raise modern.UnknownMethod(f"Method not found: {method}.")
    if spec.capability == tasks_extension.EXTENSION and not declares(spec.capability):
        raise modern.UnknownMethod(f"Method not found: {method} (no tool of this server runs as a task).")
    if spec.capability is not None and not declares(spec.capability):
        raise modern.UnknownMethod(f"Method not found: {method}.")
    return spec


def handler_for(spec, params: dict, may_send: bool):
    """The method's handler, run in a round (MRTR) when it may ask its client something or the
    request continues a round; a call that can do neither (a tool without a context) is awaited
    as it is, without the round's task and settling (a tenth of an echo call's cost)."""
    if spec.round_trip and (may_send or rounds.continues_a_round(params)):
        return functools.partial(rounds.serve, spec.handler, spec.name)  # its handler may ask the client
    return spec.handler


def check_tool_headers(tool, request, headers):
    """The ``Mcp-Param`` headers of a call of ``tool`` (None: not a tool's call) mirror its arguments."""
    arguments = request.params.get("arguments")
    if tool is not None and isinstance(arguments, dict):
        modern.check_param_headers(arguments, tool.input_schema, headers)


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


def error_reply(request_id, exc: ProtocolError) -> dict:
    """"Every error on a well-formed request carries the request id"; resource-not-found is
    -32602 now: 2026 responses "MUST NOT emit -32002"."""
    code = ErrorCode.INVALID_PARAMS if exc.code == ErrorCode.RESOURCE_NOT_FOUND else exc.code
    return error_message(request_id, code, exc.message, exc.data)


#: The modern era's rules: a background tool's job is relayed on the call's own response
#: (``ModernResponder.handle``); errors keep the statuses 2026-07-28 gives them (404 for an
#: unknown method ...).
RULES = EraRules(METHODS, resumable_jobs=False, in_band_errors=False)

#: The answer of a background call whose job someone else (the admin) cancelled: the call
#: still gets its one answer.
CANCELLED_ELSEWHERE = "The call was cancelled before it finished."
#: The cache hint of a result that is the caller's own and of this moment (search_tools': the
#: tools it may use now): "private", as the lists, which "MAY vary by the authorization presented".
PRIVATE_NOW = (0, "private")


class ModernResponder:
    """The era's half of a request pipeline responder (running/pipeline.py) for one 2026-07-28
    request: its checks, its methods and its answers' form. A transport adds how they are sent
    (``reply``: what a ``ModernChannel`` sends on)."""

    __slots__ = ("request", "reply", "headers", "body_size", "meta", "handler")

    rules = RULES

    def __init__(self, request, reply, headers: dict, body_size: int):
        self.request, self.reply, self.headers, self.body_size = request, reply, headers, body_size
        self.meta = self.handler = None

    def check_envelope(self) -> dict:
        """The request's ``_meta`` and headers (spec 2026-07-28 ladder), its client info's size."""
        request = self.request
        self.meta = modern.check_envelope(request, self.headers, METHODS.get(request.method, UNKNOWN).target)
        check_client_info_size(self.meta, self.body_size)
        return self.meta

    async def check(self, request, call) -> None:
        """The envelope, the method (404), the tool's param headers."""
        self.check_envelope()
        route = call.route
        self.handler = handler_for(served(route.spec, request.method), request.params, route.may_send)
        # The headers mirror the request as sent: a call_tool call's are call_tool's.
        sent_tool = route.tool if route.request is self.request else discovery.CALL
        check_tool_headers(sent_tool, self.request, self.headers)

    async def handle(self, request, call) -> dict:
        if call.channel is None:  # answered with one message: it still reads the request's log level
            call.channel = self.channel(call)
        tool = call.route.tool
        if tool is None:
            return await self.handler(request.params, call)
        # "A v1 client may still send task: {ttl, pollInterval} ... The server MUST tolerate it ...
        # AND MUST NOT promote a sync-only tool to a task": the server alone decides (SEP-2663).
        request.params.pop("task", None)
        created = await modern_tasks.start(tool, request.params, call, request.id)
        if created is not None:
            return created
        if call.background:
            return await self.relay_job(request, call)
        return await self.handler(request.params, call)

    async def relay_job(self, request, call) -> dict:
        return await relay_job(request, call)

    def result_reply(self, request, result: dict) -> dict:
        hint = PRIVATE_NOW if discovery.caller_dependent(request) else cache_hint(request.method)
        return result_message(request.id, modern.stamp(result, dispatch.server_info(), hint))

    def error_reply(self, request_id, exc: ProtocolError) -> dict:
        return error_reply(request_id, exc)

    def channel(self, call) -> "ModernChannel":
        channel = ModernChannel(self.reply, self.request.id, (self.meta or {}).get(modern.META_LOG_LEVEL))
        channel.call = call
        return channel


async def relay_job(request, call) -> dict:
    """A background tool: a worker runs it and appends what it sends to a stream of its own in
    the event store (eras/modern_2026/jobs.py); this request relays that stream until its final event, or until
    the tool asks the client something (the round ends, the job waits for the retry)."""
    outcome = await modern_jobs.call(call.route.tool, request.params, call, request.id, call.channel.notify)
    if outcome is None:  # cancelled by someone else (the admin)
        raise ProtocolError(CANCELLED_ELSEWHERE, code=ErrorCode.INTERNAL_ERROR, http_status=200)
    if "jsonrpc" not in outcome:  # an InputRequiredResult
        return outcome
    if "result" in outcome:  # the job's answer, under this round's request id
        return dict(outcome["result"])
    error = outcome.get("error") or {}
    raise ProtocolError(error.get("message", ""), code=error.get("code", ErrorCode.INTERNAL_ERROR),
                        data=error.get("data"), http_status=200)


class ModernChannel:
    """What a tool's Context talks to: notifications go on this request's own response."""

    def __init__(self, reply, request_id, log_level):
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

    async def request(self, method, params, key=None, park=True, answerable_ahead=False):
        """"The server MUST NOT send independent JSON-RPC requests on this stream": a question
        ends the round with an InputRequiredResult instead (rounds.py)."""
        if self.round is None:
            raise ClientCapabilityError(f"Cannot send {method}: only tools/call, prompts/get and resources/read "
                                        "may ask the client in protocol 2026-07-28.")
        return await self.round.request(method, params, key=key, park=park, answerable_ahead=answerable_ahead)

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
