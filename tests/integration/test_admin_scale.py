"""Admin pages at 10,000 sessions and 100,000 stored events: a bounded number of queries per
page, whatever the table sizes (no N+1, no full-table COUNT). The query counts are recorded in
bench/RESULTS.md ("Admin at scale"), with timings that ``MCP_ADMIN_TIMINGS=1`` prints (a
report, never an assertion: no timed tests).
"""
import json
import os
import secrets
import statistics
import time
from datetime import timedelta

import pytest
from django.contrib.admin.utils import quote
from django.db import connection
from redis import Redis
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from mcp_transport.connections import keys
from mcp_transport.models import McpJob, McpSession, StoredEvent

SESSIONS, EVENTS, JOBS = 10_000, 100_000, 10_000
#: The heavy session: 20 streams of 500 events; the other 9,000 events spread 10 per session.
HEAVY_STREAMS, HEAVY_PER_STREAM = 20, 500

#: Most queries each page may make: the login's session and user, then the page's own (list:
#: a capped count and the rows; session page: the row, a capped count, the streams, the
#: events, its jobs; dashboard: running jobs, and finished jobs by bucket in one aggregate). What the
#: pages make today, so one more query per row fails.
BOUNDS = {
    "session list": 4,
    "session list, search": 4,
    "session list, filtered": 4,
    "session list, page 50": 4,
    "session page (10,000 events)": 7,
    "session page, page 100": 7,
    "session page, one stream": 7,
    "jobs list": 4,
    "jobs list, running": 4,
    "job page": 3,
    "jobs progress (100 ids)": 3,
    "dashboard": 4,
}


def _populate():
    now = timezone.now()
    ids = [secrets.token_urlsafe(24) for _ in range(SESSIONS)]
    McpSession.objects.bulk_create([
        McpSession(id=session_id, state="closed" if n % 3 == 0 else "ready", protocol_version="2025-11-25",
                   client_name=f"client-{n % 50}", client_version="1.0", last_seen_at=now - timedelta(seconds=n),
                   closed_reason="expired" if n % 3 == 0 else "")
        for n, session_id in enumerate(ids)], batch_size=2000)
    rows = []
    for stream in range(HEAVY_STREAMS):
        rows += [(ids[0], f"{stream:016x}", n) for n in range(HEAVY_PER_STREAM)]
    for session_id in ids[1:(EVENTS - len(rows)) // 10 + 1]:
        rows += [(session_id, "0123456789abcdef", n) for n in range(10)]
    assert len(rows) == EVENTS
    StoredEvent.objects.bulk_create([
        StoredEvent(session_id=session_id, stream=stream, position=f"{1_700_000_000_000 + n}-0",
                    position_ms=1_700_000_000_000 + n, position_seq=0, final=n == HEAVY_PER_STREAM - 1,
                    message={"jsonrpc": "2.0", "method": "notifications/progress",
                             "params": {"progressToken": "p", "progress": n}})
        for session_id, stream, n in rows], batch_size=5000)
    statuses = ["completed", "completed", "failed", "cancelled", "working"]
    McpJob.objects.bulk_create([
        McpJob(id=f"job{n:08d}", session_id=ids[n % SESSIONS], stream_key="0123456789abcdef", tool="slow_job",
               arguments={"steps": 10, "interval_ms": 100}, status=statuses[n % 5], progress=n % 10, total=10,
               started_at=now - timedelta(seconds=n % 100 + 5),
               finished_at=None if n % 5 == 4 else now - timedelta(seconds=n % 100))
        for n in range(JOBS)], batch_size=2000)
    McpJob.objects.update(created_at=now - timedelta(seconds=30))  # inside the dashboard's charted period
    return ids


@pytest.fixture(scope="module")
def big_tables(django_db_setup, django_db_blocker):
    # A sample from before the jobs finished: the dashboard charts jobs since its oldest sample.
    oldest = json.dumps({"t": time.time() - 600})
    redis = Redis.from_url(os.environ["REDIS_URL"])
    redis.rpush(keys().samples(), oldest)
    with django_db_blocker.unblock():
        ids = _populate()
        yield ids
        redis.lrem(keys().samples(), 1, oldest)
        StoredEvent.objects.all().delete()
        McpSession.objects.all().delete()
        McpJob.objects.all().delete()


def pages(ids):
    heavy = f"/admin/mcp_transport/mcpsession/{quote(ids[0])}/change/"
    listing = "/admin/mcp_transport/mcpsession/"
    return {
        "session list": listing,
        "session list, search": f"{listing}?q={ids[5][:10]}",
        "session list, filtered": f"{listing}?state__exact=ready&protocol_version=2025-11-25",
        "session list, page 50": f"{listing}?p=49",
        "session page (10,000 events)": heavy,
        "session page, page 100": f"{heavy}?page=100",
        "session page, one stream": f"{heavy}?stream={3:016x}",
        "jobs list": "/admin/mcp_transport/mcpjob/",
        "jobs list, running": "/admin/mcp_transport/mcpjob/?status__exact=working",
        "job page": "/admin/mcp_transport/mcpjob/job00000004/change/",
        "jobs progress (100 ids)": "/admin/mcp_transport/mcpjob/progress/?" + "&".join(
            f"id=job{n:08d}" for n in range(100)),
        "dashboard": f"{listing}dashboard/",
    }


def measure(client, url):
    client.get(url)  # warm-up: Django caches content types on the first page that needs them
    with CaptureQueriesContext(connection) as queries:
        reply = client.get(url)
    assert reply.status_code == 200, (url, reply.status_code)
    return reply, len(queries)


@pytest.mark.django_db
@pytest.mark.parametrize("name", list(BOUNDS))
def test_queries_per_page_are_bounded_at_10000_sessions(big_tables, admin_client, name):
    reply, count = measure(admin_client, pages(big_tables)[name])
    assert count <= BOUNDS[name], f"{name}: {count} queries"
    if name == "session list":
        assert reply.content.count(b'class="action-select"') == 100
    if name == "jobs list":
        assert reply.content.count(b'class="mcp-progress"') == 100
    if name == "dashboard":
        assert b'<div class="label">Jobs finished</div><div class="value">8,000</div>' in reply.content
    if name.startswith("session page"):
        assert reply.content.count(b'class="mcp-json"') >= 50


@pytest.mark.django_db
def test_session_list_count_is_capped_not_a_full_count(big_tables, admin_client):
    with CaptureQueriesContext(connection) as queries:
        admin_client.get("/admin/mcp_transport/mcpsession/")
    counts = [query["sql"] for query in queries if "COUNT(" in query["sql"].upper()]
    assert counts and all("LIMIT 5000" in sql for sql in counts), counts


@pytest.mark.django_db
@pytest.mark.skipif(not os.environ.get("MCP_ADMIN_TIMINGS"), reason="a report for bench/RESULTS.md: MCP_ADMIN_TIMINGS=1")
def test_report_timings(big_tables, admin_client, capsys):
    lines = ["| page | queries | wall ms | CPU ms (this process) |", "|---|---|---|---|"]
    for name, url in pages(big_tables).items():
        _, count = measure(admin_client, url)
        wall, cpu = [], []
        for _ in range(7):
            started, started_cpu = time.perf_counter(), time.process_time()
            admin_client.get(url)
            wall.append((time.perf_counter() - started) * 1000)
            cpu.append((time.process_time() - started_cpu) * 1000)
        lines.append(f"| {name} | {count} | {statistics.median(wall):.0f} | {statistics.median(cpu):.0f} |")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
