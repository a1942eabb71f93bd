"""Samples of the counters over time, for the admin dashboard's charts.

Counters (metrics.py) are running totals; a chart needs them at points in time. Every process's
housekeeping round (control.py) offers to take a sample; ``SET NX`` on a lock named after the
current ``DASHBOARD_SAMPLE_SECONDS`` slot lets exactly one process take it per slot, whichever
processes are alive. A sample is
a JSON object (the time, every counter, the open-stream gauges) pushed onto a Redis list capped
at ``DASHBOARD_SAMPLES`` entries, newest first. Charts plot differences between neighbours, so
a restart of Redis (counters back to zero) shows as a gap, never as a negative rate.
"""
import json
import time

from ..conf import get_config
from ..connections import async_redis, keys


async def maybe_take() -> bool:
    """Take a sample unless another process took this interval's already.

    The lock names the interval's slot (``floor(now / interval)``), so it is one sample per
    slot, and a process configured with another interval never silences this one for longer
    than its own interval."""
    interval = get_config()["DASHBOARD_SAMPLE_SECONDS"]
    slot = int(time.time() // interval)
    lock = f"{keys().sample_lock()}:{interval}:{slot}"
    if not await async_redis().set(lock, "1", px=int(interval * 2000), nx=True):
        return False
    await take()
    return True


async def take() -> dict:
    sample = await current()
    sample.pop("store", None)  # nested; repeats the flat counters
    async with async_redis().pipeline(transaction=False) as pipe:
        pipe.lpush(keys().samples(), json.dumps(sample, separators=(",", ":")))
        pipe.ltrim(keys().samples(), 0, get_config()["DASHBOARD_SAMPLES"] - 1)
        await pipe.execute()
    return sample


async def current() -> dict:
    """The counters now, with the time they were read (``t``, Unix seconds). ``buffer_entries``
    is the store's own count (the database store counts its rows, not a counter)."""
    from .metrics import snapshot

    reading = {"t": round(time.time(), 3), **await snapshot()}
    reading["buffer_entries"] = reading["store"]["buffer_entries"]
    return reading


async def recent(limit=None) -> list:
    """Samples oldest first (the order charts draw them)."""
    limit = limit or get_config()["DASHBOARD_SAMPLES"]
    raw = await async_redis().lrange(keys().samples(), 0, limit - 1)
    return [json.loads(item) for item in reversed(raw)]
