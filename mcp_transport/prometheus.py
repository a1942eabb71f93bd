"""The counters of ``metrics.snapshot()`` in the Prometheus text format, with prometheus-client.

Why a custom collector and not prometheus-client's own counters. Our counters are already
shared: every process (web or worker) adds to one Redis hash, and open streams are per-process
gauges in Redis that expire with their process (metrics.py). So a scrape of *any* process reads
the totals of *all* of them, across hosts, and nothing is lost when a process restarts.
prometheus-client's multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``) instead keeps one file per
process in a directory every process must share, so it works on one host only, needs the
directory wiped at each deploy and dead processes marked; and counting with its ``Counter``
objects would put a lock and a file write on the request path. ``McpCollector`` therefore
turns a snapshot into metric families at scrape time, and ``render()`` writes them with
prometheus-client's exposition code. To add them to a registry of your own (e.g. the default
one that ``prometheus_client.start_http_server`` serves), register ``McpCollector()``: without
a snapshot it reads one itself on each collect.
"""
from asgiref.sync import async_to_sync
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from . import tracing
from .state import histograms, metrics
from .state.metrics import JOB_BUCKETS
from .storage.base import EVICTION_REASONS, FAILURE_REASONS, REPLAY_SOURCES

#: metric name (``_total`` is added) -> (counter name in the snapshot, help)
COUNTERS = {
    "mcp_sessions_created": ("sessions_created", "Sessions opened with initialize."),
    "mcp_get_requests": ("get_requests", "GET requests: standalone streams and reconnects."),
    "mcp_get_resumes": ("get_resumes", "GET requests with Last-Event-ID that resumed a stream."),
    "mcp_resume_takeovers": ("resume_takeovers", "Resumes that took a stream over from an older connection."),
    "mcp_orphans_answered": ("orphans_answered", "Requests whose process died, answered with an error by another."),
    "mcp_sse_streams_opened": ("sse_streams_opened", "SSE responses started."),
    "mcp_followers_lost": ("followers_lost", "SSE connections ended with a retry because following their stream "
                           "failed (Redis unavailable longer than REDIS_OUTAGE_TOLERANCE); their clients resume."),
    "mcp_events_deleted": ("events_deleted", "Buffered events dropped with their session (DELETE, terminate, purge)."),
    "mcp_jobs_submitted": ("jobs_submitted", "Background jobs submitted (tools run by Celery workers)."),
    "mcp_calls_log_dropped": ("calls_log_dropped", "Calls the calls log dropped: its unwritten rows were at their "
                              "limit (the database failing)."),
    "mcp_calls_log_writes_dropped": ("calls_log_writes_dropped", "State-changing calls the calls log dropped: "
                                     "every one of its unwritten rows was a state-changing call's (the "
                                     "database failing)."),
    "mcp_calls_log_skipped": ("calls_log_skipped", "Read-only calls the calls log left out: their process had "
                              "kept CALL_LOG_MAX_PER_SECOND rows of their caller's, of their kind, that second."),
    "mcp_job_progress_reports": ("job_progress_reports", "Progress reports of background tools (with or without "
                                 "the client's progress token)."),
    "mcp_jobs_resent": ("jobs_resent", "Queued jobs sent again because Redis lost their call record (restarted "
                        "empty) and with it, on a Redis broker, their message."),
    "mcp_events_write_dropped": ("events_write_dropped", "Events whose database row the database refused "
                                 "(not in the durable record; the other rows of their batch were written)."),
    "mcp_events_unwritten_overrun": ("events_unwritten_overrun", "Appends that waited unwritten_wait seconds for "
                                     "the database and went on: Redis may trim events whose rows wait for a retry."),
}
#: metric name -> (label, counter name prefix, label values, help)
LABELLED_COUNTERS = {
    "mcp_sessions_closed": ("reason", "sessions_closed", ("deleted", "expired", "terminated"),
                            "Sessions closed, by reason."),
    "mcp_cleanup_deleted": ("kind", "cleanup_deleted", ("events", "sessions", "jobs", "calls"),
                            "Database rows deleted by the retention cleanup."),
    "mcp_limit_refusals": ("limit", "limit_refusals", metrics.LIMITS,
                           "Requests refused (or results replaced) by a limit, by limit."),
    "mcp_jobs_finished": ("status", "jobs_finished", ("completed", "failed", "cancelled"),
                          "Background jobs that ended, by status."),
}
#: Ratios need both sides; with no denominator yet they are left out rather than 0 or NaN.
RATIOS = {
    "mcp_get_resume_ratio": "Share of GET requests that resumed a stream with Last-Event-ID.",
    "mcp_replay_buffer_hit_ratio": "Share of replay attempts served from the event store's buffer "
                                   "(not the database fallback, not failed).",
}


class McpCollector(Collector):
    """Metric families from one ``metrics.snapshot()`` (read at collect time when not given)."""

    def __init__(self, snapshot: dict = None):
        self.snapshot = snapshot

    def collect(self):
        totals = async_to_sync(scrape)() if self.snapshot is None else self.snapshot
        yield from _counters(totals)
        yield from _store(totals["store"])
        yield from _streams(totals)
        yield from _ratios(totals)
        yield from _jobs(totals)
        yield from _durations(totals.get("histograms", {}))


async def scrape() -> dict:
    """What a scrape exports: ``metrics.snapshot()`` plus the jobs not ended yet (one query on
    the status index, made for scrapes only, not for the admin's snapshots) and the duration
    histograms (histograms.py, read for scrapes only too)."""
    totals = await metrics.snapshot()
    totals["jobs_active"] = await metrics.active_jobs()
    totals["histograms"] = await histograms.read()
    return totals


def render(snapshot: dict, accept: str = "") -> tuple:
    """``(body, content type)`` of a snapshot, in the format the scraper's ``Accept`` asks for:
    the Prometheus text format by default, OpenMetrics when asked (prometheus-client chooses)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(McpCollector(snapshot))
    encode, content_type = choose_encoder(accept)
    return encode(registry), content_type


def _counters(totals):
    for name, (key, text) in COUNTERS.items():
        yield CounterMetricFamily(name, text, value=totals.get(key, 0))
    for name, (label, prefix, values, text) in LABELLED_COUNTERS.items():
        yield _labelled(CounterMetricFamily(name, text, labels=[label]),
                        {value: totals.get(f"{prefix}:{value}", 0) for value in values})


def _store(stats):
    yield CounterMetricFamily("mcp_events_appended", "Events appended to the event store.",
                              value=stats["events_appended"])
    yield GaugeMetricFamily("mcp_buffer_entries", "Events the event store keeps for replay now.",
                            value=stats["buffer_entries"])
    yield _labelled(CounterMetricFamily("mcp_events_evicted", "Events that left the buffer, by reason.",
                                        labels=["reason"]), _ordered(stats["evicted"], EVICTION_REASONS))
    yield _labelled(CounterMetricFamily("mcp_replays", "Replays (Last-Event-ID) served, by where the events "
                                        "came from.", labels=["source"]), _ordered(stats["replay_hits"], REPLAY_SOURCES))
    yield _labelled(CounterMetricFamily("mcp_replay_failures", "Replays refused with 400, by reason.",
                                        labels=["reason"]), _ordered(stats["replay_failures"], FAILURE_REASONS))


def _streams(totals):
    yield GaugeMetricFamily("mcp_open_streams", "SSE connections open now, all processes.",
                            value=totals.get("open_streams", 0))
    yield GaugeMetricFamily("mcp_sessions_with_open_streams", "Sessions holding at least one SSE connection.",
                            value=totals.get("sessions_with_open_streams", 0))
    yield GaugeMetricFamily("mcp_open_streams_max_per_session", "Most SSE connections one session holds.",
                            value=totals.get("open_streams_max_per_session", 0))
    yield _labelled(GaugeMetricFamily("mcp_sessions_by_open_streams", "Sessions by how many SSE connections "
                                      "they hold at once.", labels=["streams"]),
                    totals.get("sessions_by_open_streams", {}))


def _ratios(totals):
    stats = totals["store"]
    attempts = sum(stats["replay_hits"].values()) + sum(stats["replay_failures"].values())
    from_buffer = stats["replay_hits"].get(totals.get("buffer_source", "redis"), 0)
    sides = {"mcp_get_resume_ratio": (totals.get("get_resumes", 0), totals.get("get_requests", 0)),
             "mcp_replay_buffer_hit_ratio": (from_buffer, attempts)}
    for name, (part, whole) in sides.items():
        if whole:
            yield GaugeMetricFamily(name, RATIOS[name], value=part / whole)


def _jobs(totals):
    finished = sum(totals.get(f"jobs_finished:{status}", 0) for status in LABELLED_COUNTERS["mcp_jobs_finished"][2])
    buckets = [(floatToGoString(bound), totals.get(f"job_seconds_bucket:{bound}", 0)) for bound in JOB_BUCKETS]
    yield HistogramMetricFamily("mcp_job_duration_seconds", "Seconds from a background job's submission to its end.",
                                buckets=[*buckets, ("+Inf", finished)], sum_value=totals.get("job_ms_sum", 0) / 1000)
    if "jobs_active" in totals:
        yield _labelled(GaugeMetricFamily("mcp_jobs_active", "Background jobs not ended yet, by status.",
                                          labels=["status"]), totals["jobs_active"])


#: The semantic conventions' names (model/mcp/metrics.yaml) as Prometheus names: dots become
#: underscores and the unit ("s") a ``_seconds`` suffix, as OpenTelemetry's Prometheus exporters
#: write them; attributes likewise (``mcp.method.name`` -> ``mcp_method_name``).
DURATIONS = {
    histograms.OPERATION: ("mcp_server_operation_duration_seconds", "MCP request duration as observed on the "
                           "receiver from the time it was received until the result is sent (mcp.server.operation."
                           "duration), by method, tool or prompt (registered ones) and error type (failures only)."),
    histograms.SESSION: ("mcp_server_session_duration_seconds", "The duration of the MCP session as observed on the "
                         "MCP server (mcp.server.session.duration), counted when it closes."),
}
_LABELS = tuple(name.replace(".", "_") for name in tracing.OPERATION_ATTRIBUTES)
_BOUNDS = [floatToGoString(bound) for bound in histograms.BOUNDS] + ["+Inf"]


def _durations(found: dict):
    """The convention's histograms; a label an operation has not (a tool name for another
    method, ``error_type`` for a success) is left out of its series, not written empty."""
    for histogram, (name, text) in DURATIONS.items():
        family = Metric(name, text, "histogram")
        series = found.get(histogram) or {}
        if histogram == histograms.SESSION and not series:  # present before the first session closes
            series = {(): ([0] * len(_BOUNDS), 0.0)}
        for labels, (counts, total) in sorted(series.items()):
            labelled = {label: value for label, value in zip(_LABELS, labels) if value}
            cumulative = 0
            for bound, count in zip(_BOUNDS, counts):
                cumulative += count
                family.add_sample(f"{name}_bucket", {**labelled, "le": bound}, cumulative)
            family.add_sample(f"{name}_count", labelled, cumulative)
            family.add_sample(f"{name}_sum", labelled, total)
        yield family


def _ordered(counts: dict, names) -> dict:
    return {name: counts.get(name, 0) for name in names}


def _labelled(family, values: dict):
    for label, value in values.items():
        family.add_metric([label], value)
    return family
