"""Where one request goes, worked out once: its ``Route``. Every layer after the era's check reads
the route instead of looking the method, the tool or the caller up again (as Celery's
``build_tracer`` binds a task's facts once, not on every step of its run).

A route is made in two steps, both in the request pipeline (running/pipeline.py):

1. ``Route.of(request, methods)``: the method's facts in the era's table and its target (the
   tool a ``tools/call`` names, ``call_tool``'s named tool when search discovery is on). What the
   era's check reads (the 2026-07-28 ``Mcp-Param`` headers need the tool's schema).
2. ``route.plan(...)`` once the era's check passed: how it runs (inline, on a stream of its own,
   as a background job: its arguments bound then, the others' when the handler asks, after
   admission, once), and its place in its caller's rate window (``rate_charge``).

The per-tool facts a plan reads (``may_send``, ``blocks``, ``rate_limit``) are the ToolSpec's,
fixed when the tool was registered.
"""
from dataclasses import dataclass
from typing import Any, Optional

from ..auth import may_use
from ..methods import discovery
from ..methods.registry import ArgumentError, ToolSpec, registry
from ..methods.tool_calls import task_requested
from ..methods.specs import UNKNOWN, MethodSpec
from ..protocol.errors import InvalidParams, ProtocolError
from ..protocol.jsonrpc import Request
from ..state import rates

#: The method whose target is a tool, and the one that opens a session: the method names
#: decided once, here.
TOOLS_CALL, INITIALIZE = "tools/call", "initialize"


@dataclass(slots=True)
class Route:
    """One request's way through the server. Made by ``Route.of``, completed by ``plan``."""

    #: The request to serve: a ``call_tool`` call is the call of the tool it names.
    request: Request
    #: The method's facts in the era's table (``specs.UNKNOWN`` for a method it has not).
    spec: MethodSpec
    #: The tool a ``tools/call`` names, when one is registered under that name.
    tool: Optional[ToolSpec] = None
    #: Why the request cannot be served as sent (a bad ``call_tool``), answered before it runs.
    refusal: Optional[ProtocolError] = None
    #: A ``tools/call``: ``tool`` is its tool (None: none of that name).
    calls_tool: bool = False
    #: It counts as a call (MAX_CALLS_PER_SESSION / MAX_CALLS_PER_CALLER, RATE_LIMIT).
    counts_as_call: bool = False
    #: Its handler may send messages before its result.
    may_send: bool = False
    #: Its handler runs the project's sync code in a thread.
    blocks: bool = False
    #: It opens a session (``initialize``): SESSION_OPEN_RATE counts it, REQUEST_RATE_LIMIT not.
    opens_session: bool = False
    #: The caller may use ``tool`` (auth.may_use: switched on, scopes, permission).
    usable: bool = False
    #: The tool's keyword arguments, bound once (``plan``, ``bound_arguments``), or why they cannot be.
    kwargs: Optional[dict] = None
    argument_error: Optional[Exception] = None
    #: It runs on a stream of its own (it may send before its result, or blocks a thread).
    streamed: bool = False
    #: A background tool's call: a Celery worker runs it.
    background: bool = False
    #: Its place in its caller's rate window (a rates.Charge), None: not rate limited.
    rate: Any = None

    @classmethod
    def of(cls, request: Request, methods) -> "Route":
        """The method's facts (``methods``: the era's table) and the tool it names. Never raises:
        a ``call_tool`` call whose arguments name no tool keeps its refusal (``refusal``)."""
        if request.method != TOOLS_CALL:
            spec, params = methods.get(request.method, UNKNOWN), request.params
            return cls(request, spec, counts_as_call=spec.counts_as_call, may_send=spec.may_send(params),
                       blocks=spec.blocks(params), opens_session=request.method == INITIALIZE)
        refusal = None
        try:
            request = discovery.resolve(request)
        except InvalidParams as exc:
            refusal = exc
        name = request.params.get("name")
        tool = registry.tools.get(name) if isinstance(name, str) else None  # a list is unhashable
        spec = methods.get(TOOLS_CALL, UNKNOWN)
        return cls(request, spec, tool, refusal, calls_tool=True, counts_as_call=spec.counts_as_call,
                   may_send=tool is not None and tool.may_send, blocks=tool is not None and tool.blocks)

    def plan(self, principal, wants_stream) -> None:
        """How the call runs (``wants_stream(may_send, blocks)``: the transport's choice). Only a
        background tool's arguments are bound here (a job is for valid arguments only); the
        others' are bound when the handler asks, after admission (``bound_arguments``)."""
        self.streamed = wants_stream(self.may_send, self.blocks)
        tool = self.tool
        if tool is None:
            return
        self.usable = may_use(tool, principal)
        if not (self.streamed and self.usable and tool.background) or task_requested(tool, self.request.params):
            return  # the handler decides a task, or an error about one
        self._bind(tool)
        self.background = self.argument_error is None and self.kwargs is not None

    def _bind(self, tool: ToolSpec) -> None:
        arguments = self.request.params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            return  # the handler says -32602 ("arguments" must be an object)
        try:
            self.kwargs = tool.bind(arguments)
        except (ArgumentError, InvalidParams) as exc:
            self.argument_error = exc

    def bound_arguments(self, tool: ToolSpec, arguments: dict) -> dict:
        """The keyword arguments of a call of ``tool`` with ``arguments`` (this route's), bound
        once: by ``plan`` for a background tool, else now (raising their error)."""
        if tool is not self.tool:
            return tool.bind(arguments)
        if self.kwargs is None and self.argument_error is None:
            self._bind(tool)
        if self.argument_error is not None:
            raise self.argument_error
        return dict(self.kwargs)  # the handler adds its Context to its own copy

    def rate_charge(self, caller) -> Optional[rates.Charge]:
        """A ``tools/call``'s place in its caller's window, to be taken (None: not rate limited): the
        tool's own ``rate_limit``, else RATE_LIMIT. A caller with no key (stdio without a user) is
        not limited."""
        if not self.calls_tool or not caller.key:
            return None
        tool = self.tool
        own = tool is not None and tool.rate_limit is not rates.SETTING
        rate = tool.rate_limit if own else rates.configured()
        if rate is None:
            return None
        return rates.charge_for(caller.key, rate, tool.name if own else "")

