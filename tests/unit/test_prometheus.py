"""prometheus: a metrics snapshot in the Prometheus text format, read back with prometheus-client's parser."""
from prometheus_client.parser import text_string_to_metric_families

from mcp_transport.prometheus import McpCollector, render
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
