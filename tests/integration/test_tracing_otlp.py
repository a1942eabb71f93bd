"""Spans to a real OpenTelemetry collector over OTLP/HTTP: the settings snippet of
docs/operations.md ("Sending spans to a collector"), run as written as the settings of a daphne
and a Celery worker, exports their spans to Rotel (an OpenTelemetry collector in Rust, shipped
on PyPI as a wheel with its binary; `make otlp-receiver` installs it). What the collector
received is read from its own log of it (``--debug-log traces``), so the test sees the spans
after the whole way: the SDK's batch processor, the OTLP/HTTP protobuf encoding, the collector's
receiver and decoder."""
import re
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mcp_transport.testing import free_port

from .waiting import eventually

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.filterwarnings("ignore:The logging capability is deprecated")]


def collector_binary() -> Path:
    try:
        import rotel
    except ImportError:
        pytest.skip("rotel (an OpenTelemetry collector) is not installed: `make otlp-receiver` installs it from "
                    "PyPI where a wheel of it exists for this platform")
    binary = Path(rotel.__file__).with_name("rotel-agent")
    if not binary.exists():
        pytest.skip(f"rotel is installed without its collector binary ({binary})")
    return binary


def documented_settings() -> str:
    page = (ROOT / "docs" / "operations.md").read_text()
    section = page.split("### Sending spans to a collector", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@dataclass
class Span:
    """One span as the collector logged it."""
    trace_id: str = ""
    parent_id: str = ""
    span_id: str = ""
    name: str = ""
    kind: str = ""
    resource: dict = field(default_factory=dict)
    attributes: dict = field(default_factory=dict)
    events: list = field(default_factory=list)  # [(name, {attribute: value})]


_FIELDS = {"Trace ID": "trace_id", "Parent ID": "parent_id", "ID": "span_id", "Name": "name", "Kind": "kind"}


def parse_debug_log(text: str) -> list:
    """The spans of the collector's detailed debug log (the OpenTelemetry Collector's debug
    exporter format): each ``ResourceSpans`` block's resource attributes, then per ``Span #n``
    its ids, name, kind, ``Attributes:`` (``-> key: Type(value)``) and ``SpanEvent``s."""
    spans, resource, section = [], {}, None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("ResourceSpans #"):
            resource, section = {}, "resource"
        elif stripped == "Resource attributes:":
            section = "resource"
        elif stripped.startswith("Span #"):
            spans.append(Span(resource=resource))
            section = "span"
        elif stripped == "Attributes:" and spans:
            section = "attributes"
        elif stripped.startswith("SpanEvent #") and spans:
            spans[-1].events.append(["", {}])
            section = "event"
        elif stripped.startswith("->") and ":" in stripped:
            key, value = (part.strip() for part in stripped[2:].split(":", 1))
            value = re.sub(r"^\w+\((.*)\)$", r"\1", value)  # Str(tools/call) -> tools/call
            if section == "resource":
                resource[key] = value
            elif section == "attributes":
                spans[-1].attributes[key] = value
            elif section == "event" and key == "Name":
                spans[-1].events[-1][0] = value
            elif section == "event" and line.startswith(" " * 10):  # the event's own attributes
                spans[-1].events[-1][1][key] = value
        elif section == "span" and ":" in stripped:
            label, value = (part.strip() for part in stripped.split(":", 1))
            if label in _FIELDS:
                setattr(spans[-1], _FIELDS[label], value)
    return spans


class Collector:
    """``rotel-agent start`` receiving OTLP/HTTP on a free port, logging each span it gets."""

    def __init__(self, binary, log_path):
        self.http_port, self.log_path = free_port(), log_path
        argv = [str(binary), "start", "--otlp-http-endpoint", f"127.0.0.1:{self.http_port}",
                "--otlp-grpc-endpoint", f"127.0.0.1:{free_port()}", "--exporter", "blackhole",
                "--debug-log", "traces", "--debug-log-verbosity", "detailed"]
        self.log_file = open(log_path, "w")
        self.process = subprocess.Popen(argv, stdout=self.log_file, stderr=subprocess.STDOUT, start_new_session=True,
                                        env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin"})
        deadline = time.monotonic() + 30
        while True:
            assert self.process.poll() is None, f"the collector exited:\n{self.log()}"
            try:
                socket.create_connection(("127.0.0.1", self.http_port), timeout=1).close()
                return
            except OSError:
                assert time.monotonic() < deadline, f"the collector did not listen:\n{self.log()}"
                time.sleep(0.1)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def spans(self) -> list:
        return parse_debug_log(self.log())

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log_file.close()


@pytest.fixture(scope="module")
def collector(tmp_path_factory):
    binary = collector_binary()
    running = Collector(binary, tmp_path_factory.mktemp("otlp") / "collector.log")
    yield running
    running.stop()


@pytest.fixture(scope="module")
def otlp_env(collector, tmp_path_factory, server_env):
    """The environment of a daphne or worker whose settings are the example project's plus the
    documented snippet, exporting to the collector every 100 ms."""
    package = tmp_path_factory.mktemp("otlp_settings")
    (package / "otlp_settings.py").write_text("from mcpserver.settings import *  # noqa: F401,F403\n\n"
                                              + documented_settings())
    return {"DJANGO_SETTINGS_MODULE": "otlp_settings", "PYTHONPATH": f"{package}:{server_env['PYTHONPATH']}",
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100"}


@pytest.fixture(scope="module")
def exporting(otlp_env, start_server, start_worker):
    """A daphne and a worker of their own queue (no other worker takes these jobs)."""
    env = {**otlp_env, "CELERY_QUEUE": f"otlp-{uuid.uuid4().hex[:8]}"}
    start_worker(**env)
    return start_server(**env)


def received_trace(collector, trace_id, names):
    """The spans of ``trace_id`` the collector received, by name, once all of ``names`` came."""
    def check():
        found = {span.name: span for span in collector.spans() if span.trace_id == trace_id}
        assert set(names) <= set(found), (sorted(found), collector.log()[-2000:])
        return found
    return eventually(check)


def test_the_documented_snippet_is_the_one_this_test_runs():
    snippet = documented_settings()
    assert "BatchSpanProcessor(OTLPSpanExporter())" in snippet and "set_tracer_provider" in snippet
    assert "worker_process_shutdown" in snippet


def test_the_collector_log_parser_reads_ids_attributes_and_events():
    text = """ResourceSpans #0
Resource attributes:
     -> service.name: Str(my-mcp-server)
Span #0
    Trace ID       : 0af7651916cd43dd8448eb211c80319c
    Parent ID      : 
    ID             : b7ad6b7169203331
    Name           : tools/call slow_job
    Kind           : SPAN_KIND_SERVER
Attributes:
     -> mcp.method.name: Str(tools/call)
     -> mcp_transport.job.attempt: Int(1)
Events:
SpanEvent #0
     -> Name: final message
     -> Attributes::
          -> mcp_transport.job.status: Str(completed)
"""
    (span,) = parse_debug_log(text)
    assert (span.trace_id, span.parent_id, span.span_id, span.name, span.kind) == (
        "0af7651916cd43dd8448eb211c80319c", "", "b7ad6b7169203331", "tools/call slow_job", "SPAN_KIND_SERVER")
    assert span.resource == {"service.name": "my-mcp-server"}
    assert span.attributes == {"mcp.method.name": "tools/call", "mcp_transport.job.attempt": "1"}
    assert span.events == [["final message", {"mcp_transport.job.status": "completed"}]]


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", [None, "legacy"], ids=["default-2026", "2025-11-25"])
async def test_a_background_calls_request_and_job_spans_reach_a_real_collector(exporting, collector, mode):
    from mcp import Client
    from opentelemetry import context as otel_context, trace

    trace_id, client_span = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    seen = []

    async def on_progress(progress, total, message):
        seen.append(progress)

    options = {"mode": mode} if mode else {}
    # The call is made in a trace of the test's own: the SDK client sends its trace context in
    # params._meta (SEP-414), and the spans are found by it, so none of another call can pass
    # for this one's. (With an SDK provider in this process, the client's own span is the parent.)
    token = otel_context.attach(trace.set_span_in_context(trace.NonRecordingSpan(trace.SpanContext(
        int(trace_id, 16), int(client_span, 16), is_remote=True, trace_flags=trace.TraceFlags(1)))))
    try:
        async with Client(exporting.url, **options) as client:
            result = await client.call_tool("slow_job", {"steps": 3, "interval_ms": 1}, progress_callback=on_progress)
    finally:
        otel_context.detach(token)
    assert result.content[0].text == "done 3" and seen == [1, 2, 3]

    found = received_trace(collector, trace_id, ["tools/call slow_job", "run_job slow_job"])
    request, job = found["tools/call slow_job"], found["run_job slow_job"]
    assert request.kind == "SPAN_KIND_SERVER" and job.kind == "SPAN_KIND_CONSUMER"
    assert request.parent_id  # continues the client's trace (its span, or the test's)
    assert job.parent_id == request.span_id  # the worker's span is the call's child
    assert request.resource["service.name"] == job.resource["service.name"] == "my-mcp-server"
    # The attributes of the OpenTelemetry semantic conventions for MCP.
    assert request.attributes["mcp.method.name"] == "tools/call"
    assert request.attributes["gen_ai.tool.name"] == job.attributes["gen_ai.tool.name"] == "slow_job"
    assert request.attributes["gen_ai.operation.name"] == "execute_tool"
    assert request.attributes["mcp.protocol.version"] == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert ("mcp.session.id" in request.attributes) == (mode == "legacy")
    assert request.attributes["network.transport"] == "tcp"
    assert len(job.attributes["mcp_transport.job.id"]) == 8  # never the whole id: a task's taskId
    events = [name for name, _ in job.events]
    assert events.count("progress") == 3 and events[-1] == "final message"
    assert job.events[-1][1]["mcp_transport.job.status"] == "completed"


def test_a_pool_process_that_ends_sends_the_spans_it_still_held(otlp_env, collector, start_server, start_worker):
    """A Celery pool process ends with os._exit, which runs no exit handler: what its batch
    processor held would be lost but for the snippet's worker_process_shutdown flush. The
    worker here sends only at its end (a schedule delay of an hour)."""
    from mcp_transport.testing import ModernClient

    queue = f"otlp-{uuid.uuid4().hex[:8]}"
    worker = start_worker(**{**otlp_env, "CELERY_QUEUE": queue, "OTEL_BSP_SCHEDULE_DELAY": "3600000"})
    server = start_server(**otlp_env, CELERY_QUEUE=queue)
    trace_id, client_span = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    stream = ModernClient(server.url).open("tools/call", {"name": "slow_job", "arguments": {"steps": 2, "interval_ms": 1},
                                                          "_meta": {"progressToken": 1, "traceparent": f"00-{trace_id}-{client_span}-01"}},
                                           timeout=60)
    assert list(stream.messages())[-1]["result"]["content"][0]["text"] == "done 2"
    received_trace(collector, trace_id, ["tools/call slow_job"])  # daphne's, within 100 ms
    assert "run_job slow_job" not in {span.name for span in collector.spans() if span.trace_id == trace_id}

    worker.stop()  # a warm shutdown: the pool processes end
    job = received_trace(collector, trace_id, ["run_job slow_job"])["run_job slow_job"]
    assert [name for name, _ in job.events][-1] == "final message"
