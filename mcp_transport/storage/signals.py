"""What a store tells the rest of the system: doorbells, and counters of what happened to events.

The Redis store does both inside its append script. The other stores use these helpers.
"""
import asyncio
import weakref
from collections import Counter

from ..connections import async_redis, keys, publish

_ringers = weakref.WeakKeyDictionary()


async def closed_sessions(session_ids) -> list:
    """Those of ``session_ids`` that were closed (``sessions.close_many`` marks them first)."""
    session_ids = list(session_ids)
    names = keys()
    marks = await async_redis().mget([names.closed(session_id) for session_id in session_ids]) if session_ids else []
    return [session_id for session_id, mark in zip(session_ids, marks) if mark is not None]


def metrics_key() -> str:
    """The ``{prefix}:metrics`` hash: the store's counters sit next to metrics.py's."""
    return f"{keys().prefix}:metrics"


async def ring(session_id: str, stream_key: str, counts: dict = None) -> None:
    """Publish on the stream's doorbell so live tails read again, adding ``counts`` to the
    shared counters; concurrent rings of one loop share a round trip."""
    loop = asyncio.get_running_loop()
    ringer = _ringers.get(loop)
    if ringer is None:
        ringer = _ringers[loop] = Coalescer(_ring_all)
    await ringer.submit((keys().stream_bell(session_id, stream_key), counts or {}))


async def _ring_all(items) -> list:
    total = Counter()
    async with async_redis().pipeline(transaction=False) as pipe:
        for channel in dict.fromkeys(channel for channel, _ in items):
            publish(pipe, channel, "1")
        for _, counts in items:
            total.update(counts)
        _queue_counts(pipe, total)
        await pipe.execute()
    return [None] * len(items)


def _queue_counts(pipe, counts):
    for name, amount in counts.items():
        if amount:
            pipe.hincrby(metrics_key(), name, amount)


class RedisCounters:
    """Counters in Redis, so that every process adds to and reads the same totals."""

    #: Seconds ``add_soon`` counts wait, so that a replay's counter is not written while its
    #: events are (one loop thread does both) and a burst of resumes shares one round trip.
    DELAY = 0.05

    def __init__(self):
        self._soon = weakref.WeakKeyDictionary()  # loop -> Counter waiting for its flush
        self._pending = set()

    async def add(self, counts: dict) -> None:
        if any(counts.values()):
            async with async_redis().pipeline(transaction=False) as pipe:
                _queue_counts(pipe, counts)
                await pipe.execute()

    def add_soon(self, counts: dict) -> None:
        """Add a little later without waiting: a replay's first event must not wait for its
        counter. ``read()`` in this process writes such adds first."""
        loop = asyncio.get_running_loop()
        waiting = self._soon.get(loop)
        if waiting is None:
            waiting = self._soon[loop] = Counter()
            loop.call_later(self.DELAY, self._flush_soon, loop)
        waiting.update(counts)

    def _flush_soon(self, loop):
        counts = self._soon.pop(loop, None)
        if counts:
            task = loop.create_task(self.add(counts))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def read(self) -> dict:
        loop = asyncio.get_running_loop()
        self._flush_soon(loop)
        pending = [task for task in self._pending if task.get_loop() is loop]
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        return {name: int(value) for name, value in (await async_redis().hgetall(metrics_key())).items()}


class LocalCounters:
    """Counters of one process (the in-memory store's, which no other process can see)."""

    def __init__(self):
        self.counts = Counter()

    async def add(self, counts: dict) -> None:
        self.counts.update(counts)

    async def read(self) -> dict:
        return dict(self.counts)


def evictions(counter: dict) -> dict:
    """``{"capacity": 2}`` as counter names: ``{"events_evicted:capacity": 2}``."""
    return {f"events_evicted:{reason}": n for reason, n in counter.items() if n}


class Coalescer:
    """Coalesces the calls of one event loop into batches: ``send(items) -> results``.

    While one batch is in flight, items queue; the next batch carries all of them. Alone, an
    item waits for nothing but its own call; under load, one round trip carries many."""

    def __init__(self, send):
        self._send = send
        self._pending = []
        self._draining = False

    async def submit(self, item) -> str:
        future = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        if not self._draining:
            self._draining = True
            asyncio.get_running_loop().create_task(self._drain())
        return await future

    async def _drain(self):
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                await self._send_batch(batch)
        finally:
            self._draining = False

    async def _send_batch(self, batch):
        try:
            positions = await self._send([item for item, _ in batch])
        except BaseException as exc:  # noqa: B902 -- every waiter must hear about it
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, future), position in zip(batch, positions):
            if not future.done():
                future.set_result(position)
