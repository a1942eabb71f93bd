"""A ``tools/call`` is worked out once (issue 39): its tool is looked up in the registry once and
its caller made once, in both eras, from its POST through the consumer to its answer; a
``call_tool`` call (search discovery) looks up the tool it names once more, and nothing else.
Counted, not timed: a layer that looks the tool or the caller up again fails here."""
import json

import pytest
from channels.testing import ApplicationCommunicator

from mcp_transport.auth import callers
from mcp_transport.methods.registry import registry
from mcp_transport.methods.specs import CountedDict
from mcp_transport.testing import ModernClient
from mcp_transport.transports.streamable_http import McpHttpConsumer

pytestmark = pytest.mark.django_db(transaction=True)

_modern = ModernClient("http://127.0.0.1/mcp")
BASE = {"host": "127.0.0.1", "content-type": "application/json", "accept": "application/json, text/event-stream"}


class CountingTools(CountedDict):
    """The registry's tools, counting the reads of one tool by name."""

    reads = 0

    def get(self, key, default=None):
        self.reads += 1
        return super().get(key, default)

    def __getitem__(self, key):
        self.reads += 1
        return super().__getitem__(key)


@pytest.fixture
def counted(monkeypatch):
    """(the tools, the callers made): counters over the registry and ``Caller.of``."""
    tools = CountingTools(registry.tools)
    monkeypatch.setattr(registry, "tools", tools)
    made = []
    of = callers.Caller.of.__func__

    def counted_of(cls, *args, **kwargs):
        made.append(args)
        return of(cls, *args, **kwargs)
    monkeypatch.setattr(callers.Caller, "of", classmethod(counted_of))
    return tools, made


async def post(message: dict, headers: dict) -> tuple:
    """One POST through the consumer: (status, headers, body)."""
    scope = {"type": "http", "method": "POST", "path": "/mcp", "client": ("127.0.0.1", 5000),
             "headers": [(name.lower().encode(), value.encode()) for name, value in {**BASE, **headers}.items()]}
    communicator = ApplicationCommunicator(McpHttpConsumer.as_asgi(), scope)
    await communicator.send_input({"type": "http.request", "body": json.dumps(message).encode()})
    start = await communicator.receive_output(30)
    body = b""
    while True:
        event = await communicator.receive_output(30)
        body += event.get("body", b"")
        if not event.get("more_body"):
            break
    return start["status"], dict(start["headers"]), json.loads(body)


def echo(request_id):
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "once"}}}


async def test_a_2026_call_looks_its_tool_up_once_and_makes_its_caller_once(counted):
    tools, made = counted
    message = _modern.modern_message("tools/call", {"name": "echo", "arguments": {"text": "once"}}, request_id=1)
    status, _, answer = await post(message, _modern.modern_headers(message))
    assert status == 200 and answer["result"]["content"][0]["text"] == "once"
    assert (tools.reads, len(made)) == (1, 1)


async def test_a_2025_call_looks_its_tool_up_once_and_makes_its_caller_once(counted):
    tools, made = counted
    status, headers, _ = await post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "once", "version": "1"}}}, {})
    session = {"mcp-session-id": headers[b"mcp-session-id"].decode(), "mcp-protocol-version": "2025-11-25"}
    assert status == 200
    tools.reads, made[:] = 0, []
    status, _, answer = await post(echo(1), session)
    assert status == 200 and answer["result"]["content"][0]["text"] == "once"
    assert (tools.reads, len(made)) == (1, 1)
