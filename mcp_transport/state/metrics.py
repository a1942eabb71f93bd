"""Counters for the signals the seed articles ask for, shared by every process through Redis.

Counting costs nothing on the request path: ``incr()`` adds to a dict in the process, and the
housekeeping task (control.py) flushes it with HINCRBY every HEARTBEAT_SECONDS, in the round
trip it makes anyway. So totals lag by at most that long. Gauges of open streams are written
per process (a snapshot that expires if the process dies) and summed when read.

Names (fields of the ``{prefix}:metrics`` hash):

- ``get_requests``, ``get_resumes`` (GET with Last-Event-ID): reconnects and their share;
- from the event store: ``replay_hits:redis|database|memory``, ``replay_failures:unknown|evicted``,
  ``events_evicted:capacity|ttl|session_cap``, ``buffer_entries`` (storage/redis.py);
- ``resume_takeovers``: a resume ended another connection of the same stream;
- ``orphans_answered``: requests whose process died, answered with an error by another;
- ``followers_lost``: SSE connections ended with a ``retry`` because following their stream
  failed (Redis gone longer than REDIS_OUTAGE_TOLERANCE): their clients resume;
- ``sessions_created``, ``sessions_closed:deleted``, ``sessions_closed:expired``;
- ``sse_streams_opened``; the store adds its own (``events_evicted:<reason>``, ``replay_hits:*``);
- ``cleanup_deleted:events|sessions``: rows the retention cleanup deleted (operations.py);
- ``limit_refusals:<limit>``: requests refused by a limit (``LIMITS``; README "Limits");
- ``calls_log_dropped``: calls the calls log dropped, its backlog full (running/calls.py), and
  ``calls_log_writes_dropped`` the state-changing ones among them (dropped last);
- ``calls_log_skipped``: calls past their caller's ``CALL_LOG_MAX_PER_SECOND``, not recorded
  (running/calls.py; state-changing calls are never skipped);
- ``job_progress_reports``: a background tool's ``ctx.report_progress`` calls, token or not;
- ``jobs_submitted``, ``jobs_finished:<status>``, ``job_ms_sum`` and the cumulative
  ``job_seconds_bucket:<upper bound>``: background jobs and how long they took (``record_job``);
- ``jobs_resent``: queued jobs sent again because Redis lost their call record and, with it,
  most likely their broker message (running/jobs/settling.py: ``recall``);

Per session (a ``{prefix}:sesscount:{session}`` hash each, flushed the same way, kept for
``SESSION_COUNTERS_TTL`` after its last change, for the admin): ``resumes`` (GET with
``Last-Event-ID`` on a live session), ``replays`` and ``replay_failures`` (how those went), and
``replayed_events``.

The histograms of the semantic conventions for MCP (operation and session durations) wait and
are flushed the same way, in a hash of their own (histograms.py).

``prometheus.py`` exports the snapshot in the Prometheus text format.
"""
import json
import os
import socket
from collections import Counter, defaultdict

from asgiref.sync import async_to_sync

from . import histograms
from ..connections import async_redis, keys
from ..storage import get_event_store

#: The limits whose refusals are counted (``limit_refusals:<name>``).
LIMITS = ("body_bytes", "header_bytes", "headers", "receive_seconds", "sessions_per_address", "calls_per_session",
          "calls_per_caller", "client_info_bytes", "subscriptions", "uri_bytes", "tool_seconds", "event_bytes",
          "replay_bytes", "rate", "request_rate", "session_open_rate")

_pending = Counter()
#: session id -> Counter of its own counters, waiting for the next flush.
_pending_sessions = defaultdict(Counter)
#: Seconds a session's counters outlive their last change (the admin shows closed sessions too).
SESSION_COUNTERS_TTL = 7 * 24 * 3600
#: Identifies this process's gauge snapshot.
PROCESS_ID = f"{socket.gethostname()}:{os.getpid()}"


def incr(name: str, amount: int = 1) -> None:
    _pending[name] += amount


def incr_session(session_id: str, name: str, amount: int = 1) -> None:
    _pending_sessions[session_id][name] += amount


def flush_into(pipe, open_streams: dict) -> None:
    """Queue the pending counts and this process's gauges on a Redis pipeline."""
    _queue_counts(pipe)
    gauge = keys().open_streams(PROCESS_ID)
    pipe.set(gauge, json.dumps(open_streams), ex=max(5, int(_gauge_ttl())))


def _queue_counts(pipe) -> None:
    histograms.queue(pipe)
    counts, key = dict(_pending), keys().metrics()
    _pending.clear()
    for name, amount in counts.items():
        if amount:
            pipe.hincrby(key, name, amount)
    per_session = dict(_pending_sessions)
    _pending_sessions.clear()
    for session_id, session_counts in per_session.items():
        session_key = keys().session_counters(session_id)
        for name, amount in session_counts.items():
            pipe.hincrby(session_key, name, amount)
        pipe.expire(session_key, SESSION_COUNTERS_TTL)


async def flush() -> None:
    """Add this process's pending counts to the shared ones now. Processes without the
    housekeeping loop (management commands, Celery tasks) call it when their work is done."""
    if _pending or _pending_sessions or histograms.waiting():
        async with async_redis().pipeline(transaction=False) as pipe:
            _queue_counts(pipe)
            await pipe.execute()


def flush_sync() -> None:
    """``flush()`` from sync code (a Celery worker after each task); free when nothing waits."""
    if _pending or _pending_sessions or histograms.waiting():
        async_to_sync(flush)()


def _gauge_ttl():
    from ..conf import get_config

    return get_config()["HEARTBEAT_SECONDS"] * 3


async def open_streams_per_session() -> Counter:
    """Open SSE streams of each session, summed over the processes' gauges (one per process)."""
    client, per_session = async_redis(), Counter()
    gauges = [key async for key in client.scan_iter(match=keys().open_streams("*"), count=500)]
    for raw in await client.mget(gauges) if gauges else ():
        per_session.update(json.loads(raw) if raw else {})
    return per_session


async def session_counters(session_ids) -> dict:
    """The per-session counters of each session id (one round trip)."""
    names = keys()
    async with async_redis().pipeline(transaction=False) as pipe:
        for session_id in session_ids:
            pipe.hgetall(names.session_counters(session_id))
        found = await pipe.execute() if session_ids else []
    return {session_id: {name: int(value) for name, value in counts.items()}
            for session_id, counts in zip(session_ids, found)}


async def snapshot() -> dict:
    """Totals of every counter, plus open streams per session summed over processes."""
    client, names = async_redis(), keys()
    totals = {name: int(value) for name, value in (await client.hgetall(names.metrics())).items()}
    for name, amount in _pending.items():  # not flushed yet
        totals[name] = totals.get(name, 0) + amount
    per_session = await open_streams_per_session()
    totals["open_streams"] = sum(per_session.values())
    totals["open_streams_max_per_session"] = max(per_session.values(), default=0)
    totals["sessions_with_open_streams"] = len(per_session)
    totals["sessions_by_open_streams"] = _distribution(per_session.values())
    store = get_event_store()
    totals["store"] = await store.stats()
    #: Where replays served from the store's own buffer come from ("redis" for the Redis store).
    totals["buffer_source"] = store.source
    return totals


async def active_jobs() -> dict:
    """Background jobs not ended yet, by status (few rows, on the status index)."""
    from channels.db import database_sync_to_async
    from django.db.models import Count

    from ..models import McpJob

    def count():
        rows = McpJob.objects.filter(status__in=McpJob.ACTIVE).values_list("status").annotate(n=Count("id"))
        return {**{str(status): 0 for status in McpJob.ACTIVE}, **dict(rows.order_by())}

    return await database_sync_to_async(count)()


#: Upper bounds (seconds) of the job duration histogram's buckets.
JOB_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)


async def record_job(status: str, seconds: float) -> None:
    """A background job ended with ``status`` after ``seconds`` (from its submission). Counted
    in Redis at once: the process that ends a job may be a Celery worker, which has no
    housekeeping loop to flush pending counts."""
    key = keys().metrics()
    async with async_redis().pipeline(transaction=False) as pipe:
        pipe.hincrby(key, f"jobs_finished:{status}", 1)
        pipe.hincrby(key, "job_ms_sum", round(seconds * 1000))  # every field of the hash is an integer
        for bound in JOB_BUCKETS:
            if seconds <= bound:
                pipe.hincrby(key, f"job_seconds_bucket:{bound}", 1)
        await pipe.execute()


#: Buckets of sessions by how many streams they hold open at once.
STREAM_BUCKETS = ("1", "2", "3", "4+")


def _distribution(open_counts) -> dict:
    buckets = dict.fromkeys(STREAM_BUCKETS, 0)
    for count in open_counts:
        if count > 0:
            buckets[str(count) if count < 4 else "4+"] += 1
    return buckets


snapshot_sync = async_to_sync(snapshot)
