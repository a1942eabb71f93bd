"""What an operator does to sessions: inspect, terminate, purge buffers, and clean up on a schedule.

``manage.py mcp_sessions`` and the Celery task ``mcp_transport.cleanup`` call these; so can an
admin action. Every function is async (sync callers wrap them with ``async_to_sync``).

Terminating goes through ``sessions.close()``, the path a client's DELETE takes: the row is
closed, the live copy and buffered events are dropped, and the ``closed`` control message ends
the session's open streams and running requests on every process; later requests get 404.

*Cleanup* (``cleanup()``), with the retention settings:

1. Sessions whose Redis copy expired without a DELETE (the row stays open until a request comes,
   and may never come) are closed as ``expired`` through ``sessions.close_many()`` (``close()``
   for a batch): their events go from Redis and the database. A row counts as expired once its ``last_seen_at`` is older than
   ``SESSION_IDLE_TIMEOUT`` plus the interval at which ``last_seen_at`` is written, and Redis no
   longer has the session.
2. Stored event rows older than ``EVENT_RETENTION`` go, whatever their session.
3. Rows of sessions closed longer ago than ``CLOSED_SESSION_RETENTION`` go, with any event rows
   they still have.
4. Rows of background jobs that ended longer ago than ``JOB_RETENTION`` go, and rows of the
   calls log (``McpCall``) older than ``CALL_LOG_RETENTION``.
5. Background jobs waiting for their client longer than ``CLIENT_REQUEST_TIMEOUT``, also those
   nobody follows (running/jobs/sweep.py): parked ones go on with "no answer in time", one whose
   call record is gone fails, one in its slot whose worker died is lost. All of them, oldest
   first, across runs: each run spends ``sweep.SWEEP_SECONDS`` at most.

The Celery task ``mcp_transport.cleanup`` runs it. The app puts it on Celery beat's schedule
itself (``schedule_cleanup``, every ``CLEANUP_INTERVAL`` seconds), so any ``celery beat`` of the
project (or a worker with ``-B``) runs it; a project that schedules the task itself keeps its entry.
"""
from dataclasses import asdict, dataclass
from datetime import timedelta

from asgiref.sync import async_to_sync
from celery import shared_task
from celery.signals import task_postrun
from channels.db import database_sync_to_async
from django.db.models import Count
from django.utils import timezone

from .running.jobs import sweep
from .state import metrics, sessions
from .conf import get_config
from .connections import async_redis, keys
from .models import McpCall, McpJob, McpSession, StoredEvent
from .protocol.session import SessionState
from .storage import get_event_store

#: Rows handled per query by the cleanup, so that no statement runs long or holds many locks.
BATCH = 1000


class SessionNotFound(Exception):
    pass


@database_sync_to_async
def find(session_id_or_prefix: str) -> McpSession:
    """The session with this id, or the only one whose id starts with it (at least 6 characters)."""
    rows = McpSession.objects.select_related("user")
    row = rows.filter(pk=session_id_or_prefix).first()
    if row is not None:
        return row
    if len(session_id_or_prefix) >= 6:
        matches = list(rows.filter(pk__startswith=session_id_or_prefix)[:2])
        if len(matches) == 1:
            return matches[0]
    raise SessionNotFound(f"No session {session_id_or_prefix!r} (or the prefix is not unique).")


async def terminate(session_id: str) -> bool:
    """Close an open session everywhere, as a DELETE would; False if it was already closed. One
    that has no row (it did nothing yet: state/session_rows.py) is found by its full id in Redis."""
    try:
        row = await find(session_id)
    except SessionNotFound:
        if not await async_redis().exists(keys().session(session_id)):
            raise
        await sessions.close(session_id, "terminated")
        return True
    if not row.is_open:
        return False
    await sessions.close(row.id, "terminated")
    return True


async def purge_buffers(session_id: str) -> int:
    """Drop the session's events from the store (and the Redis store's database copy); returns
    how many the store held. The session stays open: a later resume of a purged stream gets 400."""
    row = await find(session_id)
    held = await buffered(row.id)
    await get_event_store().delete_session(row.id)
    return held["store"]


async def buffered(session_id: str) -> dict:
    """How many events the session has in the event store and as database rows (with the Redis
    store, the rows are the durable copy of the same events)."""
    streams = await _streams(session_id)
    return {"store": sum(entry["store"] for entry in streams), "database": sum(entry["database"] for entry in streams)}


async def describe(session_id: str) -> dict:
    """A session's row, whether Redis still has it (and for how long), and its streams."""
    row = await find(session_id)
    ttl = await async_redis().ttl(keys().session(row.id))
    streams = await _streams(row.id)
    return {"id": row.id, "state": row.state, "closed_reason": row.closed_reason,
            "user": str(row.user) if row.user_id else None,
            "client": f"{row.client_name} {row.client_version}".strip(), "protocol_version": row.protocol_version,
            "created_at": row.created_at, "last_seen_at": row.last_seen_at, "closed_at": row.closed_at,
            "live_ttl_seconds": ttl if ttl >= 0 else None, "log_level": row.log_level,
            "buffered": {"store": sum(entry["store"] for entry in streams),
                         "database": sum(entry["database"] for entry in streams)},
            "streams": streams}


async def _streams(session_id) -> list:
    """Per stream: events the store keeps, and database rows."""
    in_store = (await get_event_store().buffered([session_id])).get(session_id, {})
    rows = {stream: count for stream, count in await database_sync_to_async(_stream_rows)(session_id)}
    return [{"stream": stream, "store": in_store.get(stream, 0), "database": rows.get(stream, 0)}
            for stream in sorted({*in_store, *rows})]


def _stream_rows(session_id):
    return list(StoredEvent.objects.filter(session_id=session_id).values("stream").annotate(n=Count("id"))
                .values_list("stream", "n"))


@dataclass
class CleanupReport:
    sessions_expired: int = 0
    events_deleted: int = 0
    sessions_deleted: int = 0
    jobs_deleted: int = 0
    calls_deleted: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


async def cleanup(now=None) -> CleanupReport:
    """Apply the retention settings once (see the module docstring)."""
    config, now = get_config(), now or timezone.now()
    report = CleanupReport()
    report.sessions_expired = await _close_expired(now - timedelta(seconds=_expiry_margin(config)))
    await sweep.expire_parked_jobs()  # a 2026-07-28 call whose client never retries
    if config["EVENT_RETENTION"] is not None:
        cutoff = now - timedelta(seconds=config["EVENT_RETENTION"])
        report.events_deleted = await database_sync_to_async(_delete_in_batches)(
            StoredEvent.objects.filter(created_at__lt=cutoff))
    if config["CLOSED_SESSION_RETENTION"] is not None:
        cutoff = now - timedelta(seconds=config["CLOSED_SESSION_RETENTION"])
        events, closed = await database_sync_to_async(_delete_closed_sessions)(cutoff)
        report.events_deleted += events
        report.sessions_deleted = closed
    if config["JOB_RETENTION"] is not None:
        cutoff = now - timedelta(seconds=config["JOB_RETENTION"])
        report.jobs_deleted = await database_sync_to_async(_delete_in_batches)(
            McpJob.objects.filter(status__in=McpJob.TERMINAL, finished_at__lt=cutoff))
    if config["CALL_LOG_RETENTION"] is not None:
        cutoff = now - timedelta(seconds=config["CALL_LOG_RETENTION"])
        report.calls_deleted = await database_sync_to_async(_delete_in_batches)(
            McpCall.objects.filter(started_at__lt=cutoff))
    metrics.incr("cleanup_deleted:calls", report.calls_deleted)
    metrics.incr("cleanup_deleted:jobs", report.jobs_deleted)
    metrics.incr("cleanup_deleted:events", report.events_deleted)
    metrics.incr("cleanup_deleted:sessions", report.sessions_deleted)
    await metrics.flush()
    return report


def _expiry_margin(config) -> float:
    """Idle seconds after which a row's session has surely left Redis: ``last_seen_at`` is only
    written every LAST_SEEN_WRITE_INTERVAL, so it may lag the last request by that much."""
    return config["SESSION_IDLE_TIMEOUT"] + sessions.LAST_SEEN_WRITE_INTERVAL


async def _close_expired(seen_before) -> int:
    closed, after = 0, ""
    while True:
        ids = await database_sync_to_async(_open_rows_seen_before)(seen_before, after)
        if not ids:
            return closed
        after = ids[-1]
        async with async_redis().pipeline(transaction=False) as pipe:
            for session_id in ids:
                pipe.exists(keys().session(session_id))
            alive = await pipe.execute()
        gone = [session_id for session_id, in_redis in zip(ids, alive) if not in_redis]
        if gone:
            await sessions.close_many(gone, "expired")
            closed += len(gone)


def _open_rows_seen_before(seen_before, after) -> list:
    rows = McpSession.objects.exclude(state=SessionState.CLOSED.value).filter(last_seen_at__lt=seen_before, pk__gt=after)
    return list(rows.order_by("pk").values_list("pk", flat=True)[:BATCH])


def _delete_in_batches(rows) -> int:
    deleted, model = 0, rows.model
    while pks := list(rows.values_list("pk", flat=True)[:BATCH]):
        deleted += model.objects.filter(pk__in=pks).delete()[1].get(model._meta.label, 0)
    return deleted


def _delete_closed_sessions(closed_before) -> tuple:
    events = deleted = 0
    rows = McpSession.objects.filter(state=SessionState.CLOSED.value, closed_at__lt=closed_before)
    while ids := list(rows.values_list("pk", flat=True)[:BATCH]):
        events += _delete_in_batches(StoredEvent.objects.filter(session_id__in=ids))
        deleted += McpSession.objects.filter(pk__in=ids).delete()[1].get(McpSession._meta.label, 0)
    return events, deleted


#: The cleanup's task, and its entry in Celery beat's schedule (``app.conf.beat_schedule``).
CLEANUP_TASK = "mcp_transport.cleanup"
CLEANUP_ENTRY = "mcp-transport-cleanup"


@shared_task(name=CLEANUP_TASK, ignore_result=True)
def cleanup_task() -> dict:
    """The cleanup as a Celery task (registered when the app is ready)."""
    return async_to_sync(cleanup)().as_dict()


def schedule_cleanup(app) -> bool:
    """Add the cleanup to the Celery app's beat schedule, every CLEANUP_INTERVAL seconds, unless
    the setting is None or the schedule already runs the task (the project's own entry wins);
    whether it added it. Called when Django is ready: Celery's Django recipe made the project's
    app the current one by then, and beat reads the schedule only when it starts."""
    interval = get_config()["CLEANUP_INTERVAL"]
    schedule = app.conf.beat_schedule
    if interval is None or any(entry.get("task") == CLEANUP_TASK for entry in schedule.values()):
        return False
    # A new dict: the old one may be the project's CELERY_BEAT_SCHEDULE setting itself.
    app.conf.beat_schedule = {**schedule, CLEANUP_ENTRY: {"task": CLEANUP_TASK, "schedule": float(interval)}}
    return True


@task_postrun.connect(dispatch_uid="mcp_transport.flush_counters")
def flush_counters_after_task(**_):
    """A Celery worker has no housekeeping loop: what its tasks counted is flushed after each."""
    metrics.flush_sync()
