"""The request pipeline (running/pipeline.py) gives every request one span and one calls-log
record, whichever front door it came through: stdio and the message transports (HTTP+SSE's
session), ``initialize``, and the requests refused before they run (issue 21), with the
OpenTelemetry SDK's in-memory exporter as tests/unit/test_tracing.py uses it. A 2026-07-28
call or listen whose client closes the response (its cancellation) has them too."""
import asyncio
import json
from types import SimpleNamespace

import pytest
from channels.testing import ApplicationCommunicator
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcp_transport import auth, tracing
from mcp_transport.transports import message_session
from mcp_transport.protocol.jsonrpc import Request
from mcp_transport.running import calls
from mcp_transport.state import histograms, sessions
from mcp_transport.testing import ModernClient
from mcp_transport.transports import stdio
from mcp_transport.transports.streamable_http import McpHttpConsumer

pytestmark = pytest.mark.django_db(transaction=True)

_exporter = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def sdk():
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(_exporter))
    # The app asks whether a provider is set at most once a second (tracing._Configured): a
    # test of this process may have asked just before, when none was.
    tracing.tracing_on.checked_at = -1.0


@pytest.fixture
def spans():
    _exporter.clear()
    yield _exporter
    _exporter.clear()


@pytest.fixture
def records(monkeypatch):
    """The calls the log keeps: (method, request id, status, error code), as its rows say them
    (for its next batch, or the audit trail's next write)."""
    kept = []
    monkeypatch.setattr(calls, "add", kept.append)
    monkeypatch.setattr(calls, "trail", lambda: SimpleNamespace(write=kept.append))
    return kept


def rows(records):
    return sorted((row[2].method, row[2].id, calls.outcome_of(row[6]) if row[7] is None else row[7],
                   (row[6] or {}).get("error", {}).get("code")) for row in records)


def by_request_id(spans):
    return {span.attributes["jsonrpc.request.id"]: span for span in spans.get_finished_spans()}


def line(request_id, method, params=None):
    message = {"jsonrpc": "2.0", "method": method, "params": params or {}}
    if request_id is not None:
        message["id"] = request_id
    return json.dumps(message).encode() + b"\n"


async def test_stdio_gives_each_request_one_span_and_one_record(spans, records):
    histograms.take()  # nothing waiting from another test of this process
    reader, out = asyncio.StreamReader(), []
    for data in (line(1, "tools/call", {"name": "echo", "arguments": {"text": "early"}}),  # before initialize
                 line(2, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                        "clientInfo": {"name": "t", "version": "1"}}),
                 line(None, "notifications/initialized"),
                 line(3, "tools/call", {"name": "echo", "arguments": {"text": "hi"}}),
                 line(4, "tools/list", {"_meta": {"progressToken": True}})):  # -32602 before it runs
        reader.feed_data(data)
    reader.feed_eof()
    await asyncio.wait_for(stdio.serve(reader, out.append), 30)

    answers = {message["id"]: message for message in map(json.loads, b"".join(out).splitlines())}
    assert answers[1]["error"]["code"] == -32600 and answers[4]["error"]["code"] == -32602
    assert answers[3]["result"]["content"][0]["text"] == "hi"
    assert rows(records) == [("initialize", 2, "ok", None), ("tools/call", 1, "error", -32600),
                             ("tools/call", 3, "ok", None), ("tools/list", 4, "error", -32602)]
    found = by_request_id(spans)
    assert sorted(found) == ["1", "2", "3", "4"]
    assert found["2"].name == "initialize" and found["3"].name == "tools/call echo"
    assert found["1"].attributes["rpc.response.status_code"] == "-32600"
    for span in found.values():  # "network.transport: pipe" for stdio, and no HTTP
        assert span.attributes["network.transport"] == "pipe" and "network.protocol.name" not in span.attributes
    # And one observation of the operation duration each (-32600, -32602: the caller's, no error.type).
    observed = {labels: sum(counts[:15]) for (kind, labels), counts in histograms.take().items() if kind == "operation"}
    assert observed == {("initialize", "", "", ""): 1, ("tools/call", "echo", "", ""): 2, ("tools/list", "", "", ""): 1}


async def test_a_message_transport_over_http_gives_each_request_one_span_and_one_record(spans, records):
    principal = auth.Principal(user=None)
    session, _cursor = await message_session.open_session(principal)
    scope, headers = {"type": "http"}, {"host": "testserver"}
    try:
        for request in (Request(id="i", method="initialize", params={"protocolVersion": "2024-11-05"}),
                        Request(id="again", method="initialize", params={"protocolVersion": "2024-11-05"})):
            await message_session.receive(await sessions.load(session.id), request, principal, scope, headers)
    finally:
        await sessions.close(session.id, "deleted")
    assert rows(records) == [("initialize", "again", "error", -32600), ("initialize", "i", "ok", None)]
    found = by_request_id(spans)
    assert found["i"].attributes["network.protocol.name"] == "http"
    assert found["again"].attributes["rpc.response.status_code"] == "-32600"


async def test_stdio_bounds_what_initialize_keeps_as_streamable_http_does(records, settings):
    # One initialize path (eras/legacy_2025/era.py: take_initialize): before, a stdio or HTTP+SSE
    # session kept client info of any size, where Streamable HTTP refused it.
    settings.MCP_TRANSPORT = {**settings.MCP_TRANSPORT, "MAX_CLIENT_INFO_BYTES": 1000}
    reader, out = asyncio.StreamReader(), []
    huge = {"name": "t", "version": "1", "description": "x" * 2000}
    for data in (line(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": huge}),
                 line(2, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                        "clientInfo": {"name": "t", "version": "1"}})):
        reader.feed_data(data)
    reader.feed_eof()
    await asyncio.wait_for(stdio.serve(reader, out.append), 30)

    answers = {message["id"]: message for message in map(json.loads, b"".join(out).splitlines())}
    assert answers[1]["error"]["code"] == -32602 and "bytes" in answers[1]["error"]["message"]
    assert answers[2]["result"]["protocolVersion"] == "2025-11-25"
    assert rows(records) == [("initialize", 1, "error", -32602), ("initialize", 2, "ok", None)]


# -- 2026-07-28: disconnect = cancel ---------------------------------------------------------------
# The /mcp consumer in process, over the ASGI messages daphne sends. Before: the cancelled task
# never reached its answer, so such a call had neither a record nor an ended span.

_modern = ModernClient("http://127.0.0.1/mcp")


async def open_modern(request_id, method, params):
    """Send one 2026-07-28 POST; returns its communicator once the response's first event (a
    progress notification, the listen's acknowledgment) arrived: the request is running."""
    message = _modern.modern_message(method, params, request_id=request_id)
    headers = {"host": "127.0.0.1", "content-type": "application/json",
               "accept": "application/json, text/event-stream",
               **{name.lower(): value for name, value in _modern.modern_headers(message).items()}}
    scope = {"type": "http", "method": "POST", "path": "/mcp", "client": ("127.0.0.1", 5000),
             "headers": [(name.encode(), value.encode()) for name, value in headers.items()]}
    communicator = ApplicationCommunicator(McpHttpConsumer.as_asgi(), scope)
    await communicator.send_input({"type": "http.request", "body": json.dumps(message).encode()})
    start = await communicator.receive_output(30)
    assert start["status"] == 200 and dict(start["headers"])[b"content-type"] == b"text/event-stream"
    assert b"event: message" in (await communicator.receive_output(30))["body"]
    return communicator


async def leave(communicator, records):
    """The client closes the response (daphne sends http.disconnect); returns once the
    cancelled request is recorded."""
    await communicator.send_input({"type": "http.disconnect"})
    await communicator.wait(30)
    for _ in range(3000):
        if records:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the request that was left has no calls-log record")


async def test_a_2026_call_whose_client_leaves_is_recorded_cancelled_and_its_span_ends(spans, records):
    communicator = await open_modern("left", "tools/call",
                                     {"name": "slow_progress", "arguments": {"steps": 1000, "interval_ms": 10},
                                      "_meta": {"progressToken": "p"}})
    assert not records and not spans.get_finished_spans()  # still running
    await leave(communicator, records)
    assert rows(records) == [("tools/call", "left", "cancelled", None)]
    span = by_request_id(spans)["left"]
    assert span.name == "tools/call slow_progress" and [event.name for event in span.events] == ["cancelled"]


async def test_a_2026_listen_whose_client_leaves_is_recorded_cancelled_and_its_span_ends(spans, records):
    communicator = await open_modern("listening", "subscriptions/listen", {"notifications": {"toolsListChanged": True}})
    await leave(communicator, records)
    assert rows(records) == [("subscriptions/listen", "listening", "cancelled", None)]
    assert [event.name for event in by_request_id(spans)["listening"].events] == ["cancelled"]
