"""prometheus: a metrics snapshot in the Prometheus text format, read back with prometheus-client's parser."""
from prometheus_client.parser import text_string_to_metric_families

from mcp_transport.prometheus import McpCollector, render
from mcp_transport.state import histograms
from mcp_transport.storage.base import stats_from_counts


def snapshot(**counts):
    store = stats_from_counts({"buffer_entries": 12, "events_appended": 40, "events_evicted:capacity": 3,
                               "events_evicted:ttl": 2, "replay_hits:redis": 6, "replay_hits:database": 2,
                               "replay_failures:unknown": 1, "replay_failures:evicted": 1})
    return {"sessions_created": 5, "sessions_closed:deleted": 2, "sessions_closed:expired": 1, "get_requests": 10,
            "get_resumes": 4, "resume_takeovers": 1, "open_streams": 3, "sessions_with_open_streams": 2,
            "open_streams_max_per_session": 2, "sessions_by_open_streams": {"1": 1, "2": 1, "3": 0, "4+": 0},
            "cleanup_deleted:events": 7, "store": store, "buffer_source": "redis", **counts}


def text_of(values, accept=""):
    body, content_type = render(values, accept)
    assert content_type.startswith("text/plain; version=0.0.4")
    return body


def samples(text: bytes) -> dict:
    """{(sample name, frozenset of labels): value} of an exposition."""
    found = {}
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            found[sample.name, frozenset(sample.labels.items())] = sample.value
    return found


def value(found, name, **labels):
    return found[name, frozenset(labels.items())]


def test_counters_and_gauges_round_trip_through_the_parser():
    found = samples(text_of(snapshot()))
    assert value(found, "mcp_sessions_created_total") == 5
    assert value(found, "mcp_sessions_closed_total", reason="deleted") == 2
    assert value(found, "mcp_sessions_closed_total", reason="terminated") == 0  # present before it happens
    assert value(found, "mcp_get_requests_total") == 10 and value(found, "mcp_get_resumes_total") == 4
    assert value(found, "mcp_replays_total", source="redis") == 6
    assert value(found, "mcp_replays_total", source="database") == 2
    assert value(found, "mcp_replay_failures_total", reason="evicted") == 1
    assert value(found, "mcp_events_evicted_total", reason="capacity") == 3
    assert value(found, "mcp_events_evicted_total", reason="session_cap") == 0
    assert value(found, "mcp_events_appended_total") == 40 and value(found, "mcp_buffer_entries") == 12
    assert value(found, "mcp_open_streams") == 3 and value(found, "mcp_open_streams_max_per_session") == 2
    assert value(found, "mcp_sessions_by_open_streams", streams="2") == 1
    assert value(found, "mcp_cleanup_deleted_total", kind="events") == 7
    assert value(found, "mcp_cleanup_deleted_total", kind="sessions") == 0


def test_ratios():
    found = samples(text_of(snapshot()))
    assert value(found, "mcp_get_resume_ratio") == 0.4
    assert value(found, "mcp_replay_buffer_hit_ratio") == 0.6  # 6 from Redis of 10 attempts


def test_ratios_without_a_denominator_are_left_out():
    empty = snapshot(get_requests=0, get_resumes=0, store=stats_from_counts({}))
    names = {name for name, _labels in samples(text_of(empty))}
    assert "mcp_get_resume_ratio" not in names and "mcp_replay_buffer_hit_ratio" not in names
    assert "mcp_replays_total" in names


def test_the_buffer_is_the_database_for_the_database_store():
    database = snapshot(buffer_source="database")
    assert value(samples(text_of(database)), "mcp_replay_buffer_hit_ratio") == 0.2


def test_every_family_has_help_and_a_type():
    text = text_of(snapshot()).decode()
    families = list(text_string_to_metric_families(text))
    assert len(families) >= 18
    for family in families:
        assert family.name.startswith("mcp_") and family.documentation
        assert family.type in ("counter", "gauge", "histogram")


def test_collector_registers_in_a_registry_of_ones_own():
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry()
    registry.register(McpCollector(snapshot()))
    assert value(samples(generate_latest(registry)), "mcp_sessions_created_total") == 5


def test_openmetrics_when_the_scraper_asks_for_it():
    body, content_type = render(snapshot(), "application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text")
    assert body.rstrip().endswith(b"# EOF")


def test_jobs_as_counters_a_histogram_and_active_gauges():
    jobs = snapshot(**{"jobs_submitted": 9, "jobs_finished:completed": 5, "jobs_finished:failed": 1,
                       "jobs_finished:cancelled": 1, "job_ms_sum": 42500, "job_seconds_bucket:1": 2,
                       "job_seconds_bucket:2.5": 3, "job_seconds_bucket:5": 6, "job_seconds_bucket:10": 6,
                       "job_seconds_bucket:3600": 7}, jobs_active={"queued": 1, "working": 1, "input_required": 0})
    found = samples(text_of(jobs))
    assert value(found, "mcp_jobs_submitted_total") == 9
    assert value(found, "mcp_jobs_finished_total", status="failed") == 1
    assert value(found, "mcp_job_duration_seconds_bucket", le="0.5") == 0
    assert value(found, "mcp_job_duration_seconds_bucket", le="2.5") == 3
    assert value(found, "mcp_job_duration_seconds_bucket", le="+Inf") == 7
    assert value(found, "mcp_job_duration_seconds_count") == 7
    assert value(found, "mcp_job_duration_seconds_sum") == 42.5
    assert value(found, "mcp_jobs_active", status="working") == 1


def test_no_jobs_yet_is_an_empty_histogram():
    found = samples(text_of(snapshot()))
    assert value(found, "mcp_job_duration_seconds_count") == 0
    assert not any(name == "mcp_jobs_active" for name, _labels in found)


def buckets(**counts) -> list:
    """A histogram's counts per bucket (not cumulative), by bound: ``le_0_01=2, inf=1``."""
    found = [0] * 15
    for bound, count in counts.items():
        found[14 if bound == "inf" else histograms.BOUNDS.index(float(bound[3:].replace("_", ".")))] = count
    return found


def test_the_semantic_conventions_histograms_with_only_the_labels_each_operation_has():
    operations = {("tools/call", "echo", "", ""): (buckets(le_0_01=3, le_0_05=1), 0.07),
                  ("tools/call", "echo", "", "tool_error"): (buckets(le_1=1), 0.6),
                  ("_OTHER", "", "", ""): (buckets(le_0_01=2), 0.004),
                  ("prompts/get", "", "summary", "-32603"): (buckets(inf=1), 301.5)}
    sessions = {(): (buckets(le_60=1, le_300=1, inf=1), 4000.0)}
    found = samples(text_of(snapshot(histograms={"operation": operations, "session": sessions})))
    name = "mcp_server_operation_duration_seconds"
    echo = {"mcp_method_name": "tools/call", "gen_ai_tool_name": "echo"}
    assert value(found, f"{name}_bucket", **echo, le="0.01") == 3
    assert value(found, f"{name}_bucket", **echo, le="0.02") == 3  # cumulative, as "le" says
    assert value(found, f"{name}_bucket", **echo, le="0.05") == 4
    assert value(found, f"{name}_bucket", **echo, le="+Inf") == value(found, f"{name}_count", **echo) == 4
    assert value(found, f"{name}_sum", **echo) == 0.07
    assert value(found, f"{name}_count", **echo, error_type="tool_error") == 1
    assert value(found, f"{name}_count", mcp_method_name="_OTHER") == 2
    prompt = {"mcp_method_name": "prompts/get", "gen_ai_prompt_name": "summary", "error_type": "-32603"}
    assert value(found, f"{name}_bucket", **prompt, le="300.0") == 0
    assert value(found, f"{name}_count", **prompt) == 1
    # No series carries a label it has not (left out, not written ""): value() matches label sets exactly.
    assert all(given for sample, labels in found if sample.startswith(name) for _label, given in labels)
    assert b'=""' not in text_of(snapshot(histograms={"operation": operations}))
    assert value(found, "mcp_server_session_duration_seconds_bucket", le="60.0") == 1
    assert value(found, "mcp_server_session_duration_seconds_bucket", le="120.0") == 1
    assert value(found, "mcp_server_session_duration_seconds_count") == 3
    assert value(found, "mcp_server_session_duration_seconds_sum") == 4000


def test_the_conventions_buckets_are_there_before_any_session_closes():
    found = samples(text_of(snapshot()))
    bounds = {dict(labels)["le"] for name, labels in found if name == "mcp_server_session_duration_seconds_bucket"}
    assert bounds == {*(str(float(bound)) for bound in histograms.BOUNDS), "+Inf"}
    assert value(found, "mcp_server_session_duration_seconds_count") == 0
    assert not any(name.startswith("mcp_server_operation_duration") for name, _labels in found)


def test_the_metrics_page_lists_every_family_and_the_labels_its_queries_use():
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    table = page[page.index("| metric | labels | what |"):page.index("Ratios are cumulative")]
    full = snapshot(jobs_active={"queued": 0}, histograms={"operation": {("tools/call", "echo", "", "x"): (
        buckets(le_1=1), 1.0)}})
    for family in text_string_to_metric_families(text_of(full).decode()):
        written = f"{family.name}_total" if family.type == "counter" else family.name
        assert f"`{written}`" in table, written
    found = samples(text_of(full))
    labels = {label for _name, pairs in found for label, _value in pairs}
    queries = page[page.index("```promql"):]
    queries = queries[:queries.index("```", 3)]
    for label in re.findall(r"(\w+)(?:=|!=)\"", queries) + re.findall(r"by \(([\w, ]+)\)", queries):
        for name in label.split(", "):
            assert name in labels, name
