"""Tracing across processes: a real daphne and a real Celery worker record their spans with the
OpenTelemetry SDK (the example project's OTEL_SPANS_FILE hook writes them to a file this test
reads). The request's span continues the client's trace, the worker's job span is its child,
and the job's progress reports and final message are events of it."""
import json
import os
import subprocess
import sys
import uuid

import pytest

from mcp_transport.testing import HttpClient, ModernClient

from .waiting import eventually

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"


@pytest.fixture(scope="module")
def traced(start_server, start_worker, tmp_path_factory):
    """A server and a worker of their own queue (no other worker takes these jobs), both
    appending their spans to one file."""
    spans = tmp_path_factory.mktemp("tracing") / "spans.jsonl"
    env = {"OTEL_SPANS_FILE": str(spans), "CELERY_QUEUE": f"tracing-{uuid.uuid4().hex[:8]}", "LOG_FORMAT": "json"}
    start_worker(**env)
    return start_server(**env), spans


def read_spans(path):
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def spans_of_trace(path, trace_id, names):
    """The spans of ``trace_id`` once every name of ``names`` has ended (by name)."""
    def check():
        found = {span["name"]: span for span in read_spans(path) if span["context"]["trace_id"] == f"0x{trace_id}"}
        assert set(names) <= set(found), (sorted(found), [(s["name"], s["context"]["trace_id"]) for s in read_spans(path)][-6:])
        return found
    return eventually(check)


def assert_job_under(found, request_name, tool, steps):
    request, job = found[request_name], found[f"run_job {tool}"]
    assert request["kind"] == "SpanKind.SERVER" and job["kind"] == "SpanKind.CONSUMER"
    assert request["parent_id"] == f"0x{CLIENT_SPAN}"  # continues the client's trace
    assert job["parent_id"] == request["context"]["span_id"]  # the worker's span is the call's child
    assert job["attributes"]["gen_ai.tool.name"] == tool
    events = [event["name"] for event in job["events"]]
    progress = [event["attributes"]["progress"] for event in job["events"] if event["name"] == "progress"]
    assert progress[:steps] == list(range(1, steps + 1))
    assert events[-1] == "final message"
    assert job["events"][-1]["attributes"]["mcp_transport.job.status"] == "completed"
    return request, job


def test_a_session_calls_background_tool_is_traced_from_its_traceparent_header_to_the_worker(traced):
    server, spans = traced
    client = HttpClient(server.url)
    client.initialize()
    message = client.message("tools/call", {"name": "slow_job", "arguments": {"steps": 3, "interval_ms": 1},
                                            "_meta": {"progressToken": "p"}})
    stream = client.stream("POST", message, {"traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN}-01",
                                             "tracestate": "rojo=00f067aa0ba902b7"})
    answers = [m for m in stream.messages() if m.get("id") == message["id"]]
    assert answers[0]["result"]["content"][0]["text"] == "done 3"

    found = spans_of_trace(spans, TRACE_ID, ["tools/call slow_job", "run_job slow_job"])
    request, _ = assert_job_under(found, "tools/call slow_job", "slow_job", 3)
    attributes = request["attributes"]
    assert attributes["mcp.method.name"] == "tools/call" and attributes["mcp.protocol.version"] == "2025-11-25"
    assert attributes["mcp.session.id"] == client.session_id[:8]
    assert attributes["jsonrpc.request.id"] == str(message["id"])
    assert "rojo" in request["context"]["trace_state"] and "00f067aa0ba902b7" in request["context"]["trace_state"]
    assert request["resource"]["attributes"]["service.name"] == "mcpserver"


def test_a_stateless_calls_trace_context_in_meta_reaches_the_worker(traced):
    server, spans = traced
    trace_id = uuid.uuid4().hex
    modern = ModernClient(server.url)
    stream = modern.open("tools/call", {"name": "slow_job", "arguments": {"steps": 2, "interval_ms": 1},
                                        "_meta": {"progressToken": 5, "traceparent": f"00-{trace_id}-{CLIENT_SPAN}-01"}},
                         timeout=60)
    messages = list(stream.messages())
    assert messages[-1]["result"]["content"][0]["text"] == "done 2"

    found = spans_of_trace(spans, trace_id, ["tools/call slow_job", "run_job slow_job"])
    request, _ = assert_job_under(found, "tools/call slow_job", "slow_job", 2)
    assert request["attributes"]["mcp.protocol.version"] == "2026-07-28"
    assert "mcp.session.id" not in request["attributes"]


def test_an_inline_error_is_recorded_as_the_conventions_say(traced):
    server, spans = traced
    trace_id = uuid.uuid4().hex
    reply = ModernClient(server.url).post("tools/call", {"name": "no_such_tool_here",
                                                         "_meta": {"traceparent": f"00-{trace_id}-{CLIENT_SPAN}-01"}})
    assert reply.json["error"]["code"] == -32602
    span = spans_of_trace(spans, trace_id, ["tools/call"])["tools/call"]  # no unregistered name in span names
    assert span["attributes"]["rpc.response.status_code"] == "-32602"
    assert "error.type" not in span["attributes"] and span["status"]["status_code"] == "UNSET"


def test_initialize_and_requests_refused_before_they_run_have_their_spans(traced):
    """Every request has its span (running/pipeline.py), initialize and the ones refused before
    they run too: a bad progress token (-32602), a 2026-07-28 Mcp-Name that is not the body's
    (400, -32020)."""
    server, spans = traced
    trace_id = uuid.uuid4().hex
    parent = {"traceparent": f"00-{trace_id}-{CLIENT_SPAN}-01"}
    client = HttpClient(server.url)
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    reply = client.request("POST", client.message("initialize", params), headers=parent, session=False)
    client.session_id = reply.headers["mcp-session-id"]
    assert client.request("POST", client.message("notifications/initialized", request_id=False)).status == 202
    refused = client.request("POST", client.message("tools/call", {"name": "echo", "arguments": {"text": "x"},
                                                                   "_meta": {"progressToken": True}}), headers=parent)
    assert refused.json["error"]["code"] == -32602
    mismatched = ModernClient(server.url).post("prompts/get", {"name": "greet"}, headers={**parent, "Mcp-Name": "other"})
    assert mismatched.status == 400 and mismatched.json["error"]["code"] == -32020

    found = spans_of_trace(spans, trace_id, ["initialize", "tools/call echo", "prompts/get"])
    assert found["initialize"]["attributes"]["mcp.session.id"] == client.session_id[:8]
    assert found["initialize"]["parent_id"] == f"0x{CLIENT_SPAN}"
    assert found["tools/call echo"]["attributes"]["rpc.response.status_code"] == "-32602"
    assert found["prompts/get"]["attributes"]["rpc.response.status_code"] == "-32020"


@pytest.fixture(scope="module")
def client_spans():
    """The test process records the official SDK client's spans (its CLIENT span of each call,
    whose context it injects in params._meta, SEP-414)."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # a provider is set once per process
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["legacy", None], ids=["2025-11-25", "default-2026"])
async def test_the_official_sdk_clients_span_is_the_parent_of_the_servers(traced, client_spans, mode):
    from mcp import Client

    server, spans = traced
    client_spans.clear()
    seen = []

    async def on_progress(progress, total, message):
        seen.append(progress)

    options = {"mode": mode} if mode else {}
    async with Client(server.url, **options) as client:
        result = await client.call_tool("slow_job", {"steps": 2, "interval_ms": 1}, progress_callback=on_progress)
    assert result.content[0].text == "done 2"
    (sent,) = [span for span in client_spans.get_finished_spans() if span.name == "MCP send tools/call slow_job"]
    trace_id = format(sent.context.trace_id, "032x")
    found = spans_of_trace(spans, trace_id, ["tools/call slow_job", "run_job slow_job"])
    request, job = found["tools/call slow_job"], found["run_job slow_job"]
    assert request["parent_id"] == f"0x{sent.context.span_id:016x}"
    assert job["parent_id"] == request["context"]["span_id"]


def test_a_log_line_of_the_call_names_its_span(traced):
    server, spans = traced
    trace_id = uuid.uuid4().hex
    reply = ModernClient(server.url).post("tools/call", {"name": "server_log", "arguments": {"text": "marker-9c1e"},
                                                         "_meta": {"traceparent": f"00-{trace_id}-{CLIENT_SPAN}-01"}})
    assert reply.json["result"]["structuredContent"] == {"result": "logged"}
    span = spans_of_trace(spans, trace_id, ["tools/call server_log"])["tools/call server_log"]

    def logged():
        records = [json.loads(line) for line in server.log().splitlines() if "marker-9c1e" in line]
        assert records
        return records[0]
    record = eventually(logged)
    assert (record["trace_id"], f"0x{record['span_id']}") == (trace_id, span["context"]["span_id"])


def test_the_calls_log_row_names_the_trace_of_its_call(traced, server_env):
    """The admin's page of a call shows its trace id, found by search, so an operator goes from
    a slow call to its trace."""
    server, spans = traced
    trace_id = uuid.uuid4().hex
    request_id = f"traced-{trace_id[:12]}"
    reply = ModernClient(server.url).post("tools/call", {"name": "echo", "arguments": {"text": "hi"},
                                                         "_meta": {"traceparent": f"00-{trace_id}-{CLIENT_SPAN}-01"}},
                                          request_id=request_id)
    assert reply.json["result"]["structuredContent"] == {"result": "hi"}
    spans_of_trace(spans, trace_id, ["tools/call echo"])
    code = ("from mcp_transport.models import McpCall; "
            f"print([row.trace_id for row in McpCall.objects.filter(request_id={request_id!r})])")

    def stored():  # the calls log writes its rows about once a second
        out = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], capture_output=True, text=True,
                             env={**os.environ, **server_env}, cwd=server_env["PYTHONPATH"], check=True).stdout
        assert out.strip().splitlines()[-1] == repr([trace_id])
    eventually(stored)
