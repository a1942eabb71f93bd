"""/metrics of live daphne processes after real MCP traffic on two of them: every process
reports the totals of all, read back with prometheus-client's parser."""
import http.client
import json
import secrets
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mcp_transport.protocol.ids import new_stream_key
from mcp_transport.testing import HttpClient

TOKEN = secrets.token_urlsafe(16)
SSE = {"Accept": "text/event-stream"}


@pytest.fixture(scope="module")
def own_env():
    """A key prefix (exact counters) and a Celery queue of their own, fast heartbeats."""
    name = f"mcpmetrics{secrets.token_hex(3)}"
    return {"MCP_KEY_PREFIX": name, "CELERY_QUEUE": name, "MCP_METRICS_TOKEN": TOKEN,
            "MCP_TRANSPORT_JSON": json.dumps({"HEARTBEAT_SECONDS": 0.5})}


@pytest.fixture(scope="module")
def pair(start_server, own_env):
    return start_server(**own_env), start_server(**own_env)


def scrape(server, token=TOKEN):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    connection.request("GET", "/metrics", headers=headers)
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response.status, response.getheader("content-type"), body


def samples(server) -> dict:
    status, content_type, body = scrape(server)
    assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
    found = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            key = sample.name + "".join(f"|{k}={v}" for k, v in sorted(sample.labels.items()))
            found[key] = sample.value
    return found


def test_token_is_required(pair):
    first, _ = pair
    assert scrape(first, token=None)[0] == 401
    assert scrape(first, token="not-the-token")[0] == 401


def test_both_processes_report_the_traffic_of_both(pair):
    first, second = pair
    one = HttpClient(first.url)
    one.initialize()
    call = one.message("tools/call", {"name": "slow_progress", "arguments": {"steps": 3, "interval_ms": 1},
                                      "_meta": {"progressToken": "p"}})
    events = one.stream("POST", call).events()  # priming, 3 progress, the response: on the first process
    assert len(events) == 5
    resumed = one.on(second.url).stream("GET", headers={**SSE, "Last-Event-ID": events[1].id})
    assert [json.loads(e.data)["params"]["progress"] for e in resumed.events()[:2]] == [2, 3]  # replayed on B

    two = HttpClient(second.url)
    two.initialize()
    unknown = f"{new_stream_key()}.1-0"  # well formed, of a stream this session never had
    assert two.request("GET", headers={**SSE, "Last-Event-ID": unknown}).status == 400
    held = two.stream("GET", headers=SSE)  # stays open on the second process
    assert held.status == 200 and held.next_event().id
    assert one.on(second.url).delete().status == 200

    expected = {
        "mcp_sessions_created_total": 2, "mcp_sessions_closed_total|reason=deleted": 1,
        "mcp_get_requests_total": 3, "mcp_get_resumes_total": 1, "mcp_get_resume_ratio": 1 / 3,
        "mcp_replays_total|source=redis": 1, "mcp_replays_total|source=database": 0,
        "mcp_replay_failures_total|reason=unknown": 1, "mcp_replay_buffer_hit_ratio": 0.5,
        "mcp_sse_streams_opened_total": 3, "mcp_events_appended_total": 6, "mcp_events_deleted_total": 5,
        "mcp_buffer_entries": 1, "mcp_open_streams": 1, "mcp_sessions_with_open_streams": 1,
        "mcp_open_streams_max_per_session": 1, "mcp_sessions_by_open_streams|streams=1": 1,
        "mcp_events_evicted_total|reason=capacity": 0,
    }
    for server in (first, second):
        found = wait_for(server, expected)
        assert {name: found.get(name) for name in expected} == expected
    held.close()


def wait_for(server, expected, timeout=30):
    """Counters reach Redis with each process's next heartbeat (0.5 s here): scrape until they match."""
    deadline = time.monotonic() + timeout
    while True:
        found = samples(server)
        if all(found.get(name) == value for name, value in expected.items()) or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_background_jobs_run_by_a_worker_are_counted(pair, own_env, start_worker):
    first, second = pair
    start_worker(**{**own_env, "MCP_TRANSPORT_JSON": json.dumps({"HEARTBEAT_SECONDS": 0.3})})
    # The active-jobs gauge counts the database's unfinished jobs, of every key prefix: CI's
    # database outlives a run (one stopped midway leaves queued rows), so it must come back to
    # what it was, not to 0.
    before = samples(second)
    active = {name: before.get(name, 0) for name in ("mcp_jobs_active|status=working", "mcp_jobs_active|status=queued")}
    client = HttpClient(first.url)
    client.initialize()
    for steps in (1, 2):
        reply = client.call("tools/call", {"name": "slow_job", "arguments": {"steps": steps, "interval_ms": 1}})
        assert reply["result"]["content"][0]["text"] == f"done {steps}", reply
    expected = {"mcp_jobs_submitted_total": 2, "mcp_jobs_finished_total|status=completed": 2,
                "mcp_jobs_finished_total|status=failed": 0, "mcp_job_duration_seconds_count": 2,
                "mcp_job_duration_seconds_bucket|le=+Inf": 2, **active,
                "mcp_job_progress_reports_total": 3}  # 1 + 2 steps, reported without a progress token
    found = wait_for(second, expected)
    assert {name: found.get(name) for name in expected} == expected
    assert 0 < found["mcp_job_duration_seconds_sum"] < 60
    assert found["mcp_job_duration_seconds_bucket|le=60.0"] == 2
