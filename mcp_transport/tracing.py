"""Tracing with OpenTelemetry: one SERVER span per MCP request, and its background job's span.

Optional: only ``opentelemetry-api`` is needed (``pip install django-mcp-transport[otel]``), and
without it every function here does nothing. The API alone records nothing either: the project
configures the SDK and its exporter (docs/operations.md, "Tracing"). Names and attributes follow
the OpenTelemetry semantic conventions for MCP (Development status,
https://opentelemetry.io/docs/specs/semconv/gen-ai/mcp/, kept in
open-telemetry/semantic-conventions-genai, model/mcp/*.yaml); the Python semconv package has
deprecated its copies of them, so the names are written here.

The span of a call starts where the call begins (``start``, from the request pipeline's
``running.pipeline.begin``, on every transport) and ends where it is recorded as finished
(``finish``, from ``running.calls.finished``). It continues the
client's trace: "Instrumentations SHOULD propagate trace context inside MCP request
params._meta" (SEP-414: ``traceparent``, ``tracestate`` in ``_meta``), and the W3C
``traceparent``/``tracestate`` HTTP headers when ``_meta`` has none. A background tool's job
keeps the trace context in its ``context`` (``job_context``), and the worker's ``run_job`` span
continues it (``job_span``): its progress reports are events of that span, and so is its final
message.

Hot path: with no tracer provider configured, ``start`` and ``finish`` return after one
comparison each (docs/operations.md has the figures), whatever trace context the client sends.
"""
import contextlib
import time
from typing import Optional

try:
    from opentelemetry import context as otel_context, metrics as otel_metrics, propagate, trace
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError:  # the extra is not installed: tracing is off
    trace = None

from . import __version__

SCOPE = "mcp_transport"

#: What a method's target is called (model/mcp/common.yaml), by its kind (methods/specs.py:
#: ``MethodSpec.target_kind``): the low-cardinality ones also name the span, "{mcp.method.name}
#: {target}"; a resource URI does not ("SHOULD NOT include it by default to avoid high
#: cardinality span names").
_ATTRIBUTES = {"tool": "gen_ai.tool.name", "prompt": "gen_ai.prompt.name", "resource": "mcp.resource.uri"}
_NAMING = {"gen_ai.tool.name", "gen_ai.prompt.name"}
#: The targets a metric labels by name (a registered one's only): tools and prompts.
_NAMED = {"tool", "prompt"}
_NETWORK = {"http": {"network.transport": "tcp", "network.protocol.name": "http"},
            "pipe": {"network.transport": "pipe"}}

#: "The following error codes indicate that the caller sent a request the receiver could not
#: serve and SHOULD NOT be considered errors" (mcp.server.status.attributes): parse error,
#: invalid request, method not found, invalid params, resource not found.
CALLER_ERRORS = frozenset({-32700, -32600, -32601, -32602, -32002})

#: The most characters of a client's string (a tool name, a URI, a request id) an attribute keeps.
MAX_VALUE = 256

#: The trace context keys, in ``_meta`` (SEP-414) and as HTTP headers (W3C Trace Context).
_KEYS = ("traceparent", "tracestate")

#: Whether the target names the span: the registry says whether a tool or prompt of that name
#: exists (apps.connect_layers), so a client sending random names makes no new span names.
known_target = None
#: ``target_of(request)``: (kind, value) of what the request acts on, as its method declares it
#: (apps.connect_layers: the methods' table; value "" when the request names none), or None.
target_of = None
#: The method names the server serves in either era, and ``initialize`` (apps.connect_layers: the
#: methods' tables): a metric labels any other name ``_OTHER``, so a client sending made-up
#: methods makes no new series. None: every name is kept (no table connected).
method_names = None
#: A metric's ``mcp.method.name`` for a method the server does not know: the fallback the
#: semantic conventions use where a name is not one of the known values (``http.request.method``).
OTHER_METHOD = "_OTHER"

if trace is not None:
    _tracer = trace.get_tracer(SCOPE, __version__)  # a proxy: it follows a provider set later
    _meter = otel_metrics.get_meter(SCOPE, __version__)
    # "mcp.server.operation.duration ... from the time it was received until the result or
    # ack is sent", in seconds (model/mcp/metrics.yaml).
    _duration = _meter.create_histogram(
        "mcp.server.operation.duration", unit="s",
        description="MCP request duration as observed on the receiver from the time it was received until the "
                    "result or ack is sent.",
        explicit_bucket_boundaries_advisory=[0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300])


class _Configured:
    """Whether the project has set a provider (the SDK's): asked of the API at most once a second
    until it has, then never again (a global provider is set once). The API's getter costs
    microseconds per call when OTEL_PYTHON_TRACER_PROVIDER is unset (its os.environ miss raises
    and catches a KeyError); a project sets its provider at startup, before any call."""

    def __init__(self, getter, unset):
        #: Whether a provider is the API's stand-in (its proxy until one is set, or a no-op).
        self.getter, self.unset = getter, unset
        self.known, self.checked_at = False, -1.0

    def __call__(self) -> bool:
        if self.known:
            return True
        now = time.monotonic()
        if now - self.checked_at >= 1.0:
            self.checked_at = now
            self.known = not self.unset(self.getter())
        return self.known


if trace is not None:
    tracing_on = _Configured(trace.get_tracer_provider, lambda provider: isinstance(
        provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)))
    # The API names its proxy meter provider privately (_ProxyMeterProvider).
    metrics_on = _Configured(otel_metrics.get_meter_provider, lambda provider: isinstance(
        provider, otel_metrics.NoOpMeterProvider) or type(provider).__name__ == "_ProxyMeterProvider")


def available() -> bool:
    """The OpenTelemetry API is installed."""
    return trace is not None


def start(request, session, headers=None, transport="http"):
    """The span of the call ``request`` starts now, made current in the calling task (the
    request's own: the tasks it starts inherit it). Returns the span, or None when nothing
    records spans (then not even the client's trace context is read: parsing it costs 20 us).
    ``transport``: "http", or "pipe" for stdio."""
    if trace is None or not tracing_on():
        return None
    params = request.params if isinstance(request.params, dict) else {}
    carrier = _carrier(params.get("_meta"), headers)
    # No trace context sent: a child of what is current (an ASGI instrumentation's HTTP span).
    parent = propagate.extract(carrier) if carrier else None
    attributes, name = _attributes(request, params, session, transport)
    span = _tracer.start_span(name, context=parent, kind=SpanKind.SERVER, attributes=attributes)
    otel_context.attach(trace.set_span_in_context(span, parent))
    return span


def _carrier(meta, headers) -> dict:
    # _meta first: it is the message's own ("If the MCP or JSON-RPC specifications provide
    # official guidance, instrumentations SHOULD prioritize that"); the headers are the HTTP
    # request's, which may carry other messages too.
    for source in (meta, headers):
        if isinstance(source, dict) and isinstance(source.get("traceparent"), str):
            return {key: source[key] for key in _KEYS if isinstance(source.get(key), str)}
    return {}


def _attributes(request, params, session, transport="http"):
    method = request.method
    attributes = {"mcp.method.name": method, "jsonrpc.request.id": str(request.id)[:MAX_VALUE]}
    # "network.transport: tcp ... pipe (stdio)"; "network.protocol.name: http" when it is HTTP.
    attributes.update(_NETWORK[transport])
    if getattr(session, "protocol_version", None):
        attributes["mcp.protocol.version"] = session.protocol_version
    if getattr(session, "id", None):
        # "Identifies MCP session". The full id is the session's credential (logs.py): its first
        # characters tell sessions apart and find it in the admin, as in the log lines.
        attributes["mcp.session.id"] = session.id[:8]
    name = method
    kind, target = (target_of(request) if target_of is not None else None) or (None, "")
    if target:
        attribute = _ATTRIBUTES[kind]
        attributes[attribute] = target[:MAX_VALUE]
        if attribute in _NAMING and (known_target is None or known_target(kind, target)):
            name = f"{method} {target}"
    if kind == "tool":
        # "SHOULD be set to execute_tool when the operation describes a tool call".
        attributes["gen_ai.operation.name"] = "execute_tool"
    return attributes, name


def finish(span, request, message, status=None, seconds=None, labels=None) -> None:
    """End the span of a finished call: ``message`` is its answer (None: cancelled, or handed to
    its background job when ``status`` says so), ``seconds`` its duration for the metric, whose
    attributes are ``labels`` (``operation_labels``, computed here when not given)."""
    if trace is None:
        return
    if span is not None:
        _record_outcome(span, message, status)
        span.end()
    if seconds is not None and metrics_on():
        _duration.record(seconds, metric_attributes(labels or operation_labels(request, message)))


def _record_outcome(span, message, status):
    error = message.get("error") if isinstance(message, dict) else None
    result = message.get("result") if isinstance(message, dict) else None
    if isinstance(error, dict):
        code = error.get("code")
        span.set_attribute("rpc.response.status_code", str(code))
        if code not in CALLER_ERRORS:
            # "error.type SHOULD be set to the string representation of that code"; "the status
            # description SHOULD match the JSONRPCError.message".
            span.set_attribute("error.type", str(code))
            span.set_status(Status(StatusCode.ERROR, str(error.get("message", ""))))
    elif isinstance(result, dict) and result.get("isError") is True:
        # "When CallToolResult is returned with isError set to true, this attribute SHOULD be
        # set to tool_error."
        span.set_attribute("error.type", "tool_error")
        span.set_status(Status(StatusCode.ERROR))
    elif message is None:
        span.add_event("background job" if status else "cancelled")


#: The attributes of ``operation_labels``, in its order, by their semantic-convention names.
OPERATION_ATTRIBUTES = ("mcp.method.name", "gen_ai.tool.name", "gen_ai.prompt.name", "error.type")


def operation_labels(request, message, known: Optional[bool] = None) -> tuple:
    """(method, tool, prompt, error) of a finished request for the operation duration metric, ""
    for an attribute it has not: the one classification behind the OpenTelemetry histogram and
    /metrics' ``mcp_server_operation_duration_seconds``. Every value is bounded: a method the
    server does not serve is ``_OTHER``, a tool or prompt name only a registered one's.

    ``error.type`` is "Conditionally Required: If and only if the operation fails"
    (model/mcp/common.yaml): the JSON-RPC error code as a string, except the codes of a caller's
    mistake, which "SHOULD NOT be considered errors" (``CALLER_ERRORS``); ``tool_error`` for a
    CallToolResult with ``isError``. A call its client cancelled, or handed to its background
    job (no answer yet), has none. ``known``: whether the named tool or prompt is registered,
    when the caller knows it (its route), else looked up."""
    method = request.method
    if method_names is not None and method not in method_names:
        method = OTHER_METHOD
    tool = prompt = error = ""
    kind, name = (target_of(request) if target_of is not None else None) or (None, "")
    if kind in _NAMED and name:
        if known is None:
            known = known_target is None or known_target(kind, name)
        if known:
            tool, prompt = (name, "") if kind == "tool" else ("", name)
    if isinstance(message, dict):
        failure, result = message.get("error"), message.get("result")
        if isinstance(failure, dict):
            code = failure.get("code")
            error = "" if code in CALLER_ERRORS else str(code)[:MAX_VALUE]
        elif isinstance(result, dict) and result.get("isError") is True:
            error = "tool_error"
    return method, tool, prompt, error


def metric_attributes(labels: tuple) -> dict:
    """The OpenTelemetry attributes of ``operation_labels``' tuple (those it has)."""
    return {name: value for name, value in zip(OPERATION_ATTRIBUTES, labels) if value}


# -- a background job ------------------------------------------------------------------------

def job_context(context: dict | None) -> dict | None:
    """A job's ``context`` with the current trace context added (``trace``), for its worker."""
    if trace is None or not trace.get_current_span().get_span_context().is_valid:
        return context
    carrier = {}
    propagate.inject(carrier)
    return {**(context or {}), "trace": carrier} if carrier else context


@contextlib.contextmanager
def job_span(job):
    """The worker's span of one run of ``job``, a child of its call's span (its ``context``
    brought it), current in this thread and kept on ``job.trace_span`` for ``job_event``."""
    carrier = (job.context or {}).get("trace") if isinstance(job.context, dict) else None
    if trace is None or not tracing_on():
        yield None
        return
    parent = propagate.extract(carrier) if isinstance(carrier, dict) else None
    # The job id's first 8 characters, as the logs and the admin show it: the whole id is a
    # 2026-07-28 task's taskId, which alone reads or cancels the task where AUTH is off, and a
    # trace backend is read more widely than the job's row.
    attributes = {"gen_ai.tool.name": job.tool, "gen_ai.operation.name": "execute_tool",
                  "mcp_transport.job.id": job.id[:8], "mcp_transport.job.attempt": job.attempts + 1}
    span = _tracer.start_span(f"run_job {job.tool}", context=parent, kind=SpanKind.CONSUMER, attributes=attributes)
    job.trace_span = span
    token = otel_context.attach(trace.set_span_in_context(span, parent))
    try:
        yield span
    finally:
        otel_context.detach(token)
        job.trace_span = None
        span.end()


def job_event(job, name: str, **attributes) -> None:
    """An event (a progress report, the final message) of the job's span, if it has one here."""
    span = getattr(job, "trace_span", None)
    if span is not None:
        span.add_event(name, {key: value for key, value in attributes.items() if value is not None},
                       time.time_ns())


def job_ended(job) -> None:
    """The job's final message is written: an event of its span, with its status."""
    span = getattr(job, "trace_span", None)
    if span is None:
        return
    job_event(job, "final message", **{"mcp_transport.job.status": job.status})
    if isinstance(job.result, dict) and job.result.get("isError") is True:
        span.set_attribute("error.type", "tool_error")
        span.set_status(Status(StatusCode.ERROR, job.error or None))


def trace_id(span) -> str:
    """The trace id of ``span`` (a call's, from ``start``) as 32 hex digits; "" for None."""
    if span is None:
        return ""
    context = span.get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else ""


def current_ids():
    """The trace and span ids of the current span, as hex, or None (for log lines)."""
    if trace is None:
        return None
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return format(context.trace_id, "032x"), format(context.span_id, "016x")
