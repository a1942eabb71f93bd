"""mcp_transport/tracing.py with the OpenTelemetry SDK's in-memory exporter: the call's SERVER
span (name, attributes, outcome, parent), the job's span, the trace ids in log lines, and the
paths with no SDK configured and with no OpenTelemetry installed."""
import contextvars
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from mcp_transport import logs, tracing
from mcp_transport.protocol.jsonrpc import Request

ROOT = Path(__file__).resolve().parents[2]
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
OTHER_TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

_exporter = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def sdk():
    """The SDK records spans in this process (a provider is set once per process: a test run
    that set one already gets the exporter added to it)."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(_exporter))
    # The app asks whether a provider is set at most once a second (tracing._Configured): a
    # test of this process may have asked just before, when none was.
    tracing.tracing_on.checked_at = -1.0
    yield


@pytest.fixture
def spans():
    _exporter.clear()
    yield _exporter
    _exporter.clear()


def run(function, *args):
    """``function`` in a context of its own, as a request's task runs (start attaches to it)."""
    return contextvars.copy_context().run(function, *args)


def session(id="", version="2025-11-25"):
    return SimpleNamespace(id=id, protocol_version=version)


def call_tool(name="echo", meta=None, request_id=7):
    params = {"name": name, "arguments": {}}
    if meta is not None:
        params["_meta"] = meta
    return Request(id=request_id, method="tools/call", params=params)


def served(request, message, headers=None, the_session=None, status=None):
    def serve():
        span = tracing.start(request, the_session or session("s3cr3t-session-id-0123"), headers)
        inside = tracing.current_ids()
        tracing.finish(span, request, message, status, 0.01)
        return inside
    return run(serve)


def only_span(spans):
    finished = spans.get_finished_spans()
    assert len(finished) == 1, finished
    return finished[0]


def test_a_tools_call_span_is_named_and_attributed_per_the_conventions(spans):
    served(call_tool(), {"jsonrpc": "2.0", "id": 7, "result": {"content": []}})
    span = only_span(spans)
    assert span.name == "tools/call echo" and span.kind == SpanKind.SERVER
    assert dict(span.attributes) == {
        "mcp.method.name": "tools/call", "jsonrpc.request.id": "7", "mcp.protocol.version": "2025-11-25",
        "mcp.session.id": "s3cr3t-s", "gen_ai.tool.name": "echo", "gen_ai.operation.name": "execute_tool",
        "network.transport": "tcp", "network.protocol.name": "http"}
    assert span.status.status_code == StatusCode.UNSET and span.parent is None


def test_a_stateless_call_has_no_session_attribute_and_a_method_without_target_is_its_name(spans):
    served(Request(id="a", method="tools/list", params={}), {"result": {"tools": []}},
           the_session=session("", "2026-07-28"))
    span = only_span(spans)
    assert span.name == "tools/list" and "mcp.session.id" not in span.attributes
    assert span.attributes["mcp.protocol.version"] == "2026-07-28" and span.attributes["jsonrpc.request.id"] == "a"


def test_an_unregistered_tool_name_does_not_name_the_span(spans, monkeypatch):
    monkeypatch.setattr(tracing, "known_target", lambda method, name: name == "echo")
    served(call_tool("no-such-tool-8f3a"), {"error": {"code": -32602, "message": "Unknown tool"}})
    span = only_span(spans)
    assert span.name == "tools/call" and span.attributes["gen_ai.tool.name"] == "no-such-tool-8f3a"


def test_the_span_continues_the_traceparent_of_meta_before_the_header(spans):
    inside = served(call_tool(meta={"traceparent": TRACEPARENT, "tracestate": "rojo=1"}), {"result": {}},
                    headers={"traceparent": OTHER_TRACEPARENT})
    span = only_span(spans)
    assert format(span.context.trace_id, "032x") == TRACE_ID and format(span.parent.span_id, "016x") == PARENT_ID
    assert span.parent.is_remote and span.context.trace_state.get("rojo") == "1"
    assert inside == (TRACE_ID, format(span.context.span_id, "016x"))  # current while the call runs


def test_the_span_continues_the_traceparent_header_when_meta_has_none(spans):
    served(call_tool(meta={"progressToken": 1}), {"result": {}}, headers={"traceparent": OTHER_TRACEPARENT})
    assert format(only_span(spans).context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"


def test_a_malformed_traceparent_starts_a_new_trace(spans):
    served(call_tool(meta={"traceparent": "00-zz-\r\n-01"}), {"result": {}}, headers={"traceparent": 12})
    span = only_span(spans)
    assert span.parent is None and span.context.is_valid


@pytest.mark.parametrize("code, error_type", [(-32603, "-32603"), (-32001, "-32001"), (-32602, None),
                                               (-32601, None), (-32002, None)])
def test_a_json_rpc_error_is_an_error_unless_the_caller_caused_it(spans, code, error_type):
    served(call_tool(), {"error": {"code": code, "message": "went wrong"}})
    span = only_span(spans)
    assert span.attributes["rpc.response.status_code"] == str(code)
    assert span.attributes.get("error.type") == error_type
    if error_type:
        assert span.status.status_code == StatusCode.ERROR and span.status.description == "went wrong"
    else:
        assert span.status.status_code == StatusCode.UNSET


def test_a_tool_error_result_is_a_tool_error(spans):
    served(call_tool(), {"result": {"content": [], "isError": True}})
    span = only_span(spans)
    assert span.attributes["error.type"] == "tool_error" and span.status.status_code == StatusCode.ERROR


def test_a_cancelled_call_and_one_handed_to_its_job_say_so(spans):
    served(call_tool(), None)
    served(call_tool(), None, status="background")
    assert [span.events[0].name for span in spans.get_finished_spans()] == ["cancelled", "background job"]


def test_the_job_span_is_a_child_of_the_call_and_records_progress_and_its_final_message(spans):
    job = SimpleNamespace(id="j0b1d" * 6, tool="slow_job", attempts=0, context=None, status="completed",
                          result={"content": []}, error="")

    def submit():
        span = tracing.start(call_tool("slow_job", meta={"traceparent": TRACEPARENT}), session("s"), None)
        context = tracing.job_context({"era": "2026-07-28"})
        tracing.finish(span, call_tool("slow_job"), None, "background")
        return context
    job.context = run(submit)
    assert job.context["era"] == "2026-07-28" and job.context["trace"]["traceparent"].startswith(f"00-{TRACE_ID}-")

    with tracing.job_span(job):  # in the worker, with what the job's row brought
        in_job = tracing.current_ids()
        tracing.job_event(job, "progress", progress=1, total=None, message="one")
        tracing.job_ended(job)
    call_span, job_span = spans.get_finished_spans()
    assert job_span.name == "run_job slow_job" and job_span.kind == SpanKind.CONSUMER
    # Never the whole id: it is a 2026-07-28 task's taskId, a credential where AUTH is off.
    assert job_span.attributes["mcp_transport.job.id"] == "j0b1dj0b"
    assert job_span.parent.span_id == call_span.context.span_id and job_span.context.trace_id == call_span.context.trace_id
    assert in_job == (TRACE_ID, format(job_span.context.span_id, "016x"))
    progress, final = job_span.events
    assert (progress.name, dict(progress.attributes)) == ("progress", {"progress": 1, "message": "one"})
    assert (final.name, final.attributes["mcp_transport.job.status"]) == ("final message", "completed")
    assert tracing.current_ids() is None and getattr(job, "trace_span") is None


def test_log_lines_carry_the_trace_and_span_ids_in_both_formats(spans):
    def log_both():
        span = tracing.start(call_tool(meta={"traceparent": TRACEPARENT}), session("s"), None)
        made = logging.LogRecord("mcp_transport.test", logging.INFO, __file__, 1, "hello", (), None)
        handler = logging.StreamHandler()
        handler.addFilter(logs.ContextFilter())
        handler.setFormatter(logging.Formatter("%(message)s [%(trace_id)s %(span_id)s]"))
        assert handler.filter(made)
        plain = handler.format(made)
        tracing.finish(span, call_tool(), {"result": {}})
        return plain, json.loads(logs.JsonFormatter().format(made)), format(span.get_span_context().span_id, "016x")
    plain, payload, span_id = run(log_both)
    assert plain == f"hello [{TRACE_ID} {span_id}]"
    assert (payload["trace_id"], payload["span_id"]) == (TRACE_ID, span_id)
    made = logging.LogRecord("x", logging.INFO, __file__, 1, "outside", (), None)
    assert json.loads(logs.JsonFormatter().format(made))["trace_id"] == "-"


def test_with_no_sdk_configured_nothing_is_recorded_nor_read(spans, monkeypatch):
    monkeypatch.setattr(tracing, "tracing_on", tracing._Configured(trace.get_tracer_provider, lambda provider: True))  # as if none were set
    assert served(call_tool(), {"result": {}}) is None
    assert served(call_tool(meta={"traceparent": TRACEPARENT}), {"result": {}}) is None
    assert spans.get_finished_spans() == ()
    assert tracing.job_context({"era": "x"}) == {"era": "x"}
    job = SimpleNamespace(id="j", tool="t", attempts=0, context={})
    with tracing.job_span(job) as span:
        assert span is None


def test_the_app_runs_without_opentelemetry_installed():
    # A fresh interpreter in which importing opentelemetry fails, as where the extra is absent.
    code = """
import sys
sys.modules["opentelemetry"] = None
from types import SimpleNamespace
from mcp_transport import logs, tracing
from mcp_transport.protocol.jsonrpc import Request
import logging, json
request = Request(id=1, method="tools/call", params={"name": "echo", "_meta": {"traceparent": "%s"}})
assert not tracing.available()
span = tracing.start(request, SimpleNamespace(id="s", protocol_version="2025-11-25"), {"traceparent": "x"})
tracing.finish(span, request, {"result": {}}, None, 0.1)
assert tracing.job_context({"a": 1}) == {"a": 1} and tracing.current_ids() is None
with tracing.job_span(SimpleNamespace(context={"trace": {}})) as job_span:
    assert job_span is None
record = logging.LogRecord("x", logging.INFO, "f", 1, "m", (), None)
assert json.loads(logs.JsonFormatter().format(record))["trace_id"] == "-"
print("ok")
""" % TRACEPARENT
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_the_cost_per_call_with_no_sdk_is_negligible(monkeypatch):
    """start + finish of a call with no provider set, its client sending a traceparent, touch
    nothing of OpenTelemetry but the two cached "is it configured" checks: the client's trace
    context is not parsed (20 us), no span is made and no metric recorded. Counted, not timed (a
    busy machine times anything)."""
    monkeypatch.setattr(tracing, "tracing_on", tracing._Configured(trace.get_tracer_provider, lambda provider: True))
    monkeypatch.setattr(tracing, "metrics_on", tracing._Configured(tracing.otel_metrics.get_meter_provider, lambda provider: True))
    touched = []
    for owner, name in ((tracing.propagate, "extract"), (tracing._tracer, "start_span"), (tracing._duration, "record"),
                        (tracing.otel_context, "attach"), (tracing, "_carrier"), (tracing, "_attributes")):
        monkeypatch.setattr(owner, name, lambda *args, _name=name, **kwargs: touched.append(_name))
    request, the_session, message = call_tool(meta={"traceparent": TRACEPARENT}), session("s"), {"result": {}}
    for _ in range(3):
        assert tracing.start(request, the_session, {"traceparent": TRACEPARENT}) is None
        tracing.finish(None, request, message, None, 0.001)
    assert touched == []


def test_a_provider_set_after_the_first_calls_is_seen_within_a_second(monkeypatch):
    unset, current, clock = object(), [None], [100.0]
    current[0] = unset
    monkeypatch.setattr(tracing.time, "monotonic", lambda: clock[0])
    configured = tracing._Configured(lambda: current[0], lambda provider: provider is unset)
    assert configured() is False
    current[0] = object()  # the project sets its provider
    assert configured() is False  # not asked again within the second
    clock[0] += 1.0
    assert configured() is True and configured() is True


def test_the_snippet_of_docs_operations_md_exports_the_apps_spans(tmp_path):
    """The "Tracing" section's settings snippet, run as a process's settings would: the span of
    a call reaches its file (at the process's exit, the batch processor's last flush)."""
    page = (ROOT / "docs" / "operations.md").read_text()
    snippet = page.split("## Tracing", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    code = snippet + """
from types import SimpleNamespace
from mcp_transport import tracing
from mcp_transport.protocol.jsonrpc import Request
request = Request(id=1, method="tools/call", params={"name": "echo"})
tracing.target_of = lambda request: ("tool", "echo")  # what the app's methods declare (apps.py)
tracing.finish(tracing.start(request, SimpleNamespace(id="", protocol_version="2026-07-28")), request, {"result": {}})
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    (span,) = [json.loads(line) for line in (tmp_path / "spans.jsonl").read_text().splitlines()]
    assert span["name"] == "tools/call echo" and span["resource"]["attributes"]["service.name"] == "my-mcp-server"


def test_a_call_without_trace_context_is_a_child_of_what_is_current(spans):
    def serve():
        with trace.get_tracer("asgi").start_as_current_span("POST /mcp") as http_span:
            tracing.finish(tracing.start(call_tool(), session()), call_tool(), {"result": {}})
            return http_span.get_span_context().span_id
    http_span_id = run(serve)
    call_span = next(span for span in spans.get_finished_spans() if span.name == "tools/call echo")
    assert call_span.parent.span_id == http_span_id


def test_the_operation_duration_histogram_is_recorded_when_a_meter_provider_is_set(monkeypatch):
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    # the app's own test of whether a provider is set, asked afresh (no answer cached from before)
    monkeypatch.setattr(tracing, "metrics_on", tracing._Configured(metrics.get_meter_provider, tracing.metrics_on.unset))
    monkeypatch.setattr(tracing, "known_target", lambda method, name: name == "echo")
    monkeypatch.setattr(tracing, "method_names", frozenset({"tools/call"}))
    tracing.finish(None, call_tool(), {"result": {}}, None, 0.25)
    tracing.finish(None, call_tool("made-up"), {"error": {"code": -32603, "message": "x"}}, None, 0.5)
    # The same attributes as /metrics' series (operation_labels): a tool's isError result is a
    # tool_error, a method the server does not serve is _OTHER.
    tracing.finish(None, call_tool(), {"result": {"isError": True}}, None, 1.5)
    tracing.finish(None, Request(id=1, method="x" * 50, params={}), {"error": {"code": -32601, "message": ""}},
                   None, 2.5)
    (metric,) = [metric for resource in reader.get_metrics_data().resource_metrics
                 for scope in resource.scope_metrics for metric in scope.metrics]
    assert (metric.name, metric.unit) == ("mcp.server.operation.duration", "s")
    points = {tuple(sorted(point.attributes.items())): point.sum for point in metric.data.data_points}
    assert points == {(("gen_ai.tool.name", "echo"), ("mcp.method.name", "tools/call")): 0.25,
                      (("error.type", "-32603"), ("mcp.method.name", "tools/call")): 0.5,
                      (("error.type", "tool_error"), ("gen_ai.tool.name", "echo"), ("mcp.method.name", "tools/call")):
                      1.5,
                      (("mcp.method.name", "_OTHER"),): 2.5}


@pytest.fixture
def registered(monkeypatch):
    """The server serves these methods; echo and the prompt summary are registered
    (apps.connect_layers connects both in a running server)."""
    monkeypatch.setattr(tracing, "method_names", frozenset({"initialize", "tools/call", "tools/list", "prompts/get",
                                                            "resources/read"}))
    monkeypatch.setattr(tracing, "known_target", lambda method, name: name in ("echo", "summary"))


@pytest.mark.parametrize("request_, message, labels", [
    (call_tool(), {"result": {"content": []}}, ("tools/call", "echo", "", "")),
    (call_tool(), {"result": {"content": [], "isError": True}}, ("tools/call", "echo", "", "tool_error")),
    # "The following error codes indicate that the caller sent a request the receiver could not
    # serve and SHOULD NOT be considered errors": -32700, -32600, -32601, -32602, -32002.
    (call_tool("no-such-tool"), {"error": {"code": -32602, "message": "Unknown tool"}}, ("tools/call", "", "", "")),
    (Request(id=1, method="made/up", params={}), {"error": {"code": -32601, "message": "x"}}, ("_OTHER", "", "", "")),
    (Request(id=1, method="resources/read", params={"uri": "x:/y"}), {"error": {"code": -32002, "message": "x"}},
     ("resources/read", "", "", "")),
    (call_tool(), {"error": {"code": -32600, "message": "Too many calls"}}, ("tools/call", "echo", "", "")),
    # "Any other error code SHOULD be considered an error."
    (call_tool(), {"error": {"code": -32603, "message": "x"}}, ("tools/call", "echo", "", "-32603")),
    (call_tool(), {"error": {"code": -32021, "message": "x"}}, ("tools/call", "echo", "", "-32021")),
    (Request(id=1, method="prompts/get", params={"name": "summary"}), {"result": {"messages": []}},
     ("prompts/get", "", "summary", "")),
    (Request(id=1, method="prompts/get", params={"name": "not-one"}), {"result": {"messages": []}},
     ("prompts/get", "", "", "")),
    (Request(id=1, method="tools/list", params={"name": "echo"}), {"result": {"tools": []}},
     ("tools/list", "", "", "")),
    (call_tool(), None, ("tools/call", "echo", "", "")),  # cancelled, or handed to its background job
    (Request(id=1, method="initialize", params=None), {"result": {}}, ("initialize", "", "", "")),
], ids=["ok", "tool_error", "unknown tool", "unknown method", "resource not found", "limit", "internal",
        "missing capability", "prompt", "unknown prompt", "no target", "no answer", "initialize"])
def test_operation_labels_are_bounded_and_name_only_failures(registered, request_, message, labels):
    assert tracing.operation_labels(request_, message) == labels


def test_a_clients_long_strings_are_cut_in_attributes(spans):
    served(call_tool("x" * 10_000, request_id="i" * 10_000), {"result": {}})
    span = only_span(spans)
    assert span.name == "tools/call"
    assert len(span.attributes["gen_ai.tool.name"]) == len(span.attributes["jsonrpc.request.id"]) == tracing.MAX_VALUE
