"""``LocalClient``: call your tools, resources and prompts in this process, for fast unit tests.

The request goes through the server's own ``dispatch`` (argument validation, the Context, the
result's shape), with no server, no network and no Redis; what the tool sends on the way
(progress, logs, requests to the client) is recorded. A background tool runs inline here: the
live fixtures (``mcp_transport.testing.pytest``) test it in a real worker.

    call = await LocalClient().call_tool("export_report", {"rows": 3})
    assert call.text == "exported 3 rows"
    assert [p["progress"] for p in call.progress] == [1, 2, 3]
"""
import inspect
import itertools
from dataclasses import dataclass, field

from asgiref.sync import async_to_sync
from django.contrib.auth.models import AnonymousUser

from ..auth import Principal
from ..auth.callers import Caller
from ..methods.context import ClientCapabilityError, manage_connections
from ..methods.dispatch import Call, dispatch
from ..protocol import ids, versions
from ..protocol.jsonrpc import Request
from ..protocol.session import SessionState
from ..state.sessions import SessionRecord


@dataclass
class ToolCall:
    """What one ``tools/call`` returned and sent."""

    #: The CallToolResult (``content``, ``structuredContent``, ``isError``).
    result: dict
    #: Every notification the tool sent, in order: ``{"method": ..., "params": ...}``.
    notifications: list = field(default_factory=list)
    #: Every request the tool sent the client (sampling, elicitation, roots), in order.
    requests: list = field(default_factory=list)

    @property
    def progress(self) -> list:
        return [n["params"] for n in self.notifications if n["method"] == "notifications/progress"]

    @property
    def logs(self) -> list:
        return [n["params"] for n in self.notifications if n["method"] == "notifications/message"]

    @property
    def is_error(self) -> bool:
        return bool(self.result.get("isError"))

    @property
    def text(self):
        """The first text block's text, or None."""
        return next((block["text"] for block in self.result.get("content", []) if block.get("type") == "text"), None)

    @property
    def structured(self):
        return self.result.get("structuredContent")


class _Recorder:
    """The channel a tool's Context talks to: it records instead of sending."""

    cancelled = False

    def __init__(self, request_id, answer):
        self.request_id, self.answer = request_id, answer
        self.notifications, self.requests = [], []

    async def notify(self, method, params):
        self.notifications.append({"method": method, "params": params})

    async def request(self, method, params, **_options):
        self.requests.append({"method": method, "params": params})
        if self.answer is None:
            raise ClientCapabilityError(f"Cannot send {method}: give LocalClient(answer=...) to answer it.")
        reply = self.answer(method, params)
        return await reply if inspect.isawaitable(reply) else reply

    async def close_stream(self, retry_ms=None):
        return None


class LocalClient:
    """A client of this process's registry.

    ``user``: the Django user the tools see as ``ctx.user`` (AnonymousUser by default).
    ``answer(method, params)``: answers the tool's requests to the client (``sampling/createMessage``,
    ``elicitation/create``, ``roots/list``) with a result dict, sync or async. ``client_capabilities``:
    what the client declares (``{"sampling": {}, "elicitation": {}}`` to let tools ask)."""

    def __init__(self, *, user=None, log_level="debug", client_capabilities=None, answer=None):
        self.user = user or AnonymousUser()
        self.principal = Principal.for_user(self.user) if self.user.is_authenticated else Principal(user=self.user)
        self.session = SessionRecord(id=ids.new_session_id(), protocol_version=versions.LATEST,
                                     state=SessionState.READY.value, log_level=log_level,
                                     client_capabilities=client_capabilities or {}, user_id=self.principal.user_id,
                                     principal=self.principal.key)
        self.answer = answer
        self._ids = itertools.count(1)

    async def request(self, method: str, params=None, channel=None) -> dict:
        """The result of one request; a protocol error raises ``ProtocolError`` (``.code``)."""
        request = Request(id=next(self._ids), method=method, params=params or {})
        channel = channel or _Recorder(request.id, self.answer)
        call = Call(session=self.session, user=self.user, principal=self.principal, channel=channel,
                    caller=Caller.of(self.principal))
        token = manage_connections.set(False)  # the test's connections are the test's own
        try:
            return await dispatch(request, call)
        finally:
            manage_connections.reset(token)

    async def call_tool(self, name: str, arguments=None, *, progress_token="progress") -> ToolCall:
        recorder = _Recorder(None, self.answer)
        params = {"name": name, "arguments": arguments or {}}
        if progress_token is not None:
            params["_meta"] = {"progressToken": progress_token}
        result = await self.request("tools/call", params, channel=recorder)
        return ToolCall(result, recorder.notifications, recorder.requests)

    def call_tool_sync(self, name: str, arguments=None, **options) -> ToolCall:
        """``call_tool`` from a sync test."""
        return async_to_sync(self.call_tool)(name, arguments, **options)

    async def list_tools(self) -> list:
        return (await self.request("tools/list"))["tools"]

    async def read_resource(self, uri: str) -> list:
        return (await self.request("resources/read", {"uri": uri}))["contents"]

    async def get_prompt(self, name: str, arguments=None) -> dict:
        return await self.request("prompts/get", {"name": name, "arguments": arguments or {}})
