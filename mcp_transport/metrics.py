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
- ``sessions_created``, ``sessions_closed:deleted``, ``sessions_closed:expired``;
- ``sse_streams_opened``; the store adds its own (``events_evicted:<reason>``, ``replay_hits:*``).
"""
import json
import os
import socket
from collections import Counter

from asgiref.sync import async_to_sync

from .connections import async_redis, keys
from .storage import get_event_store

_pending = Counter()
#: Identifies this process's gauge snapshot.
PROCESS_ID = f"{socket.gethostname()}:{os.getpid()}"


def incr(name: str, amount: int = 1) -> None:
    _pending[name] += amount


def flush_into(pipe, open_streams: dict) -> None:
    """Queue the pending counts and this process's gauges on a Redis pipeline."""
    _queue_counts(pipe)
    gauge = keys().open_streams(PROCESS_ID)
    pipe.set(gauge, json.dumps(open_streams), ex=max(5, int(_gauge_ttl())))


def _queue_counts(pipe) -> None:
    counts, key = dict(_pending), keys().metrics()
    _pending.clear()
    for name, amount in counts.items():
        if amount:
            pipe.hincrby(key, name, amount)


async def flush() -> None:
    """Add this process's pending counts to the shared ones now. Processes without the
    housekeeping loop (management commands, Celery tasks) call it when their work is done."""
    if _pending:
        async with async_redis().pipeline(transaction=False) as pipe:
            _queue_counts(pipe)
            await pipe.execute()


def _gauge_ttl():
    from .conf import get_config

    return get_config()["HEARTBEAT_SECONDS"] * 3


async def snapshot() -> dict:
    """Totals of every counter, plus open streams per session summed over processes."""
    client, names = async_redis(), keys()
    totals = {name: int(value) for name, value in (await client.hgetall(names.metrics())).items()}
    for name, amount in _pending.items():  # not flushed yet
        totals[name] = totals.get(name, 0) + amount
    per_session = Counter()
    async for key in client.scan_iter(match=names.open_streams("*"), count=500):
        raw = await client.get(key)
        per_session.update(json.loads(raw) if raw else {})
    totals["open_streams"] = sum(per_session.values())
    totals["open_streams_max_per_session"] = max(per_session.values(), default=0)
    totals["sessions_with_open_streams"] = len(per_session)
    totals["store"] = await get_event_store().stats()
    return totals


snapshot_sync = async_to_sync(snapshot)
