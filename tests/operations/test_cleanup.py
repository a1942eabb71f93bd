"""operations.cleanup(): the retention settings applied to real rows and a real Redis."""
import secrets
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from mcp_transport import operations
from mcp_transport.connections import async_redis, keys
from mcp_transport.models import McpCall, McpJob, McpSession, StoredEvent
from mcp_transport.protocol.ids import GET_STREAM, new_session_id
from mcp_transport.storage import get_event_store

pytestmark = pytest.mark.django_db(transaction=True)

DAY = timedelta(days=1)


@pytest.fixture(autouse=True)
def own_prefix():
    """A key prefix of its own, so the counters are exact; the store's thread closed after."""
    prefix = f"{settings.MCP_TRANSPORT['KEY_PREFIX']}-{secrets.token_hex(3)}"
    config = {**settings.MCP_TRANSPORT, "KEY_PREFIX": prefix, "SESSION_IDLE_TIMEOUT": 1800,
              "EVENT_RETENTION": 86400, "CLOSED_SESSION_RETENTION": 7 * 86400, "JOB_RETENTION": 7 * 86400}
    with override_settings(MCP_TRANSPORT=config):
        yield prefix
        table = getattr(get_event_store(), "table", None)
        if table is not None:
            table.close()


def session_row(last_seen, state="ready", closed_at=None, reason=""):
    return McpSession.objects.create(id=new_session_id(), state=state, protocol_version="2025-11-25",
                                     last_seen_at=last_seen, closed_at=closed_at, closed_reason=reason).id


def events(session_id, n, age=timedelta(0)):
    StoredEvent.objects.bulk_create([
        StoredEvent(session_id=session_id, stream="s1", position=f"{i}-0", position_ms=i, position_seq=0)
        for i in range(1, n + 1)])
    StoredEvent.objects.filter(session_id=session_id).update(created_at=timezone.now() - age)


async def counters():
    raw = await async_redis().hgetall(keys().metrics())
    return {name: int(value) for name, value in raw.items()}


async def test_sessions_gone_from_redis_are_closed_as_expired_with_their_events():
    now = timezone.now()
    expired = await _sync(session_row, now - timedelta(hours=2))
    alive_in_redis = await _sync(session_row, now - timedelta(hours=2))
    recent = await _sync(session_row, now - timedelta(minutes=5))
    for session_id in (expired, alive_in_redis, recent):
        await _sync(events, session_id, 3)
    await async_redis().set(keys().session(alive_in_redis), "{}", ex=60)
    await async_redis().set(keys().reader(expired, GET_STREAM), "token", ex=60)

    report = await operations.cleanup()

    assert report.sessions_expired == 1
    states = await _sync(lambda: dict(McpSession.objects.values_list("id", "closed_reason")))
    assert states[expired] == "expired"
    assert states[alive_in_redis] == "" and states[recent] == ""
    left = await _sync(lambda: set(StoredEvent.objects.values_list("session_id", flat=True)))
    assert left == {alive_in_redis, recent}  # the expired session's events went with it
    assert await async_redis().exists(keys().reader(expired, GET_STREAM)) == 0
    assert (await counters())["sessions_closed:expired"] == 1


async def test_a_row_seen_within_the_idle_timeout_plus_the_write_interval_stays():
    # last_seen_at is written at most every minute: 30 min + 30 s ago may still be a live session.
    row = await _sync(session_row, timezone.now() - timedelta(seconds=1800 + 30))
    assert (await operations.cleanup()).sessions_expired == 0
    assert await _sync(lambda: McpSession.objects.get(pk=row).is_open)


async def test_event_rows_older_than_the_retention_go_whatever_their_session():
    session_id = await _sync(session_row, timezone.now())
    await _sync(events, session_id, 4, age=DAY + timedelta(minutes=1))
    other = await _sync(session_row, timezone.now())
    await _sync(events, other, 2, age=DAY - timedelta(minutes=1))

    report = await operations.cleanup()

    assert report.events_deleted == 4
    assert await _sync(lambda: list(StoredEvent.objects.values_list("session_id", flat=True).distinct())) == [other]
    assert (await counters())["cleanup_deleted:events"] == 4


async def test_closed_sessions_past_their_retention_go_with_their_events():
    now = timezone.now()
    old = await _sync(session_row, now - 9 * DAY, "closed", now - 8 * DAY, "deleted")
    kept = await _sync(session_row, now - 2 * DAY, "closed", now - 2 * DAY, "expired")
    await _sync(events, old, 3)  # a row closed lazily as "expired" keeps its events until now

    report = await operations.cleanup()

    assert (report.sessions_deleted, report.events_deleted) == (1, 3)
    assert await _sync(lambda: list(McpSession.objects.values_list("id", flat=True))) == [kept]
    assert (await counters())["cleanup_deleted:sessions"] == 1


async def test_none_keeps_everything():
    now = timezone.now()
    config = {**settings.MCP_TRANSPORT, "EVENT_RETENTION": None, "CLOSED_SESSION_RETENTION": None,
              "CALL_LOG_RETENTION": None}
    with override_settings(MCP_TRANSPORT=config):
        closed = await _sync(session_row, now - 90 * DAY, "closed", now - 90 * DAY, "deleted")
        await _sync(events, closed, 2, age=90 * DAY)
        report = await operations.cleanup()
    assert report.as_dict() == {"sessions_expired": 0, "events_deleted": 0, "sessions_deleted": 0, "jobs_deleted": 0,
                                "calls_deleted": 0}
    assert await _sync(lambda: StoredEvent.objects.count()) == 2


async def test_cleanup_pushes_its_counts_at_once():
    await _sync(session_row, timezone.now() - timedelta(hours=3))
    await operations.cleanup()
    assert (await counters())["sessions_closed:expired"] == 1  # no housekeeping loop needed


async def _sync(function, *args, **kwargs):
    return await sync_to_async(function)(*args, **kwargs)


async def test_record_job_counts_at_once_in_cumulative_buckets():
    from mcp_transport.state import metrics

    await metrics.record_job("completed", 0.3)
    await metrics.record_job("completed", 4.0)
    await metrics.record_job("failed", 7200.0)
    totals = await metrics.snapshot()
    assert (totals["jobs_finished:completed"], totals["jobs_finished:failed"]) == (2, 1)
    assert totals["job_ms_sum"] == 7204300
    assert totals["job_seconds_bucket:0.5"] == 1 and totals["job_seconds_bucket:5"] == 2
    assert totals["job_seconds_bucket:3600"] == 2  # the 2-hour job only counts in +Inf
    assert "job_seconds_bucket:0.1" not in totals


def test_counts_of_a_celery_task_are_flushed_after_it():
    from asgiref.sync import async_to_sync
    from celery.signals import task_postrun

    from mcp_transport.state import metrics

    metrics.incr("sessions_created", 3)
    task_postrun.send(sender=None, task_id="t", task=None, args=(), kwargs={}, retval=None, state="SUCCESS")
    assert not metrics._pending
    assert async_to_sync(counters)()["sessions_created"] == 3


def job(status, ended_ago=None, created_ago=timedelta(0)):
    now = timezone.now()
    made = McpJob.objects.create(id=f"job-{status}-{ended_ago}-{new_session_id()[:8]}", session_id="s", stream_key="k",
                                 tool="slow_job", status=status,
                                 finished_at=now - ended_ago if ended_ago is not None else None)
    McpJob.objects.filter(pk=made.pk).update(created_at=now - created_ago)
    return made.pk


async def test_ended_jobs_past_their_retention_go_and_running_ones_stay():
    old_done = await _sync(job, "completed", 8 * DAY)
    old_failed = await _sync(job, "failed", 8 * DAY)
    recent = await _sync(job, "cancelled", DAY)
    running = await _sync(job, "working", None, created_ago=30 * DAY)

    report = await operations.cleanup()

    assert report.jobs_deleted == 2
    left = await _sync(lambda: set(McpJob.objects.values_list("pk", flat=True)))
    assert left == {recent, running} and not {old_done, old_failed} & left
    assert (await counters())["cleanup_deleted:jobs"] == 2


def call_row(age):
    return McpCall.objects.create(started_at=timezone.now() - age, era="2026-07-28", method="tools/call",
                                  status="ok", duration_ms=1.0).pk


async def test_calls_log_rows_past_their_retention_go():
    config = {**settings.MCP_TRANSPORT, "CALL_LOG_RETENTION": 3600}
    with override_settings(MCP_TRANSPORT=config):
        old = [await _sync(call_row, timedelta(hours=2)) for _ in range(3)]
        recent = await _sync(call_row, timedelta(minutes=5))
        report = await operations.cleanup()
    assert report.calls_deleted == 3
    assert await _sync(lambda: list(McpCall.objects.values_list("pk", flat=True))) == [recent]
    assert not set(old) & {recent}
    assert (await counters())["cleanup_deleted:calls"] == 3
