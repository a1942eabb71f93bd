"""Redis event store: one Redis stream per SSE stream, and the database as the durable record.

Theory of operation.

*Append.* ``APPEND_LUA`` does, in one script call and one round trip: XADD (trimmed to
``maxlen``, exactly by default, and counting what the trim removed), EXPIRE (``ttl``), the
session cap, the counters, and a PUBLISH on the stream's doorbell channel. Appends of one event
loop are coalesced (``signals.Coalescer``): while a call is in flight, new appends queue and the
next call carries them all, so under load one round trip carries many events. Positions are
Redis entry ids, so ordering and uniqueness inside a stream come from Redis, whichever process
appends. A stream that Redis lost (flush, restart) is recreated at the next millisecond, so its
new ids are greater than every id the lost one gave out (same ms, seq from 0 would repeat them).

*Bookkeeping* (keys from ``StoreKeys``). ``lengths`` (a hash) holds how many events each stream
and each session keeps; ``expiries`` (a sorted set) holds when each stream expires; each session
has a sorted set of its streams scored by the time of their oldest kept event. Every append
also sweeps a few expired streams out of ``expiries``: that is how TTL evictions are counted,
within moments of the expiry, and how ``buffer_entries`` (appended minus evicted minus deleted,
in ``{prefix}:metrics``) stays right without scanning the keyspace. A stream found missing on
append (expired, or deleted behind our back) is counted the same way. So counts lag a TTL
expiry until the next append anywhere or the next ``stats()``; a FLUSHALL resets them.

*Session cap.* When a session holds more than ``session_max_events`` events, the script trims
the stream whose oldest event is the session's oldest, one stream at a time, until the session
fits: with one new event at a time this evicts exactly the session's oldest event. The same for
``session_max_bytes`` (SESSION_MAX_BYTES): the bytes of the messages each stream and session
keep are counted in ``lengths`` too (``b|<key>``), so the script knows them without reading.

*Durability* (``persist``). ``"batched"`` (default): an event is in Redis when ``append``
returns, and reaches the database within ``flush_interval`` seconds (or as soon as
``flush_max`` events wait); losing Redis's copy *and* the appending process within that window
loses it. No event leaves Redis before its row is written: an append waits while its stream
has ``maxlen`` events unwritten, or its session ``session_max_events`` events or
``session_max_bytes`` bytes (what Redis would trim or evict next), for ``unwritten_wait``
seconds at most per stall (``persist.Flusher.admit``), and only that session's appends wait.
With ``max_unwritten`` at most that many events of the whole process are in that window:
appends wait for the database beyond it (workers). ``"write_through"``: ``append`` returns once the event is in Redis and in the
database (slower appends, no window). ``"off"``: Redis only; a flush or restart of Redis loses
every buffered event.

*Replay* reads Redis first. When Redis no longer has the id (restart, flush, trim, TTL), it
falls back to the database and merges what Redis has after it, without duplicates. Replays are
counted in ``{prefix}:metrics`` as ``replay_hits:redis|database`` and
``replay_failures:unknown|evicted``.

On a Redis Cluster every key of the app shares one hash tag (``connections.keys()``), so the
scripts, which touch the session's streams besides the keys they declare, run on one node.
The scripts and their arguments are in ``redis_scripts.py``.
"""
import asyncio
import json
import weakref
from typing import NamedTuple

from django.core.exceptions import ImproperlyConfigured

from ..connections import async_redis, is_cluster, keys
from ..protocol.ids import EventId
from ..protocol.jsonrpc import dumps
from . import persist
from .base import (EventStore, Replay, StoredEvent, UnknownEvent, merge, missing_reason, numbered, position_key,
                   stats_from_counts)
from .persist import PERSIST_MODES, Backlog, EventTable, Flusher
from .redis_scripts import APPEND_LUA, DELETE_LUA, NUMBERED_LUA, _script_args
from .signals import Coalescer, RedisCounters, closed_sessions, metrics_key

#: The position an append to a closed session gets: it names no event (nothing was added).
CLOSED_POSITION = "0-0"


class StoreKeys:
    """The store's Redis keys. Stream and doorbell names come from ``connections.Keys``."""

    def __init__(self):
        self.names = keys()
        prefix = self.names.prefix
        self.shared = [metrics_key(), f"{prefix}:evlen", f"{prefix}:evexp"]

    def stream(self, session_id, stream_key):
        return self.names.stream(session_id, stream_key)

    def session_streams(self, session_id):
        """Sorted set of the session's stream keys, scored by the ms of their oldest event."""
        return f"{self.names.prefix}:evstreams:{session_id}"

    def bell(self, session_id, stream_key):
        return self.names.stream_bell(session_id, stream_key)


class _Append(NamedTuple):
    """One append waiting for its script call."""

    session_id: str
    stream_key: str
    final: bool
    #: The message as UTF-8 JSON (b"" for None), encoded once for Redis, the database and the wire.
    data: bytes


def _event(stream_key, entry_id, fields) -> StoredEvent:
    message = fields.get("m")
    return StoredEvent(EventId(stream_key, entry_id), json.loads(message) if message else None,
                       fields.get("f") == "1")


def _events(stream_key, entries) -> list:
    return [_event(stream_key, entry_id, fields) for entry_id, fields in entries]


def _numbered_rows(session_id, stream_key, first, start, before):
    """persist.numbered_rows of the stream's rows (those before position ``before``, if given)."""
    rows = persist.stream_rows(session_id, stream_key)
    return persist.numbered_rows(rows if before is None else persist.before(rows, before), stream_key, first, start)


class _LoopState:
    """What a store keeps per event loop: asyncio objects cannot cross loops."""

    def __init__(self, store):
        client = async_redis()
        # On a Cluster the doorbells are sharded channels (connections.publish).
        self.append_script = client.register_script(
            APPEND_LUA.replace("redis.call('PUBLISH'", "redis.call('SPUBLISH'") if is_cluster() else APPEND_LUA)
        self.delete_script = client.register_script(DELETE_LUA)
        self.numbered_script = client.register_script(NUMBERED_LUA)
        self.batcher = Coalescer(store._send)
        backlog = Backlog(store.maxlen, store.session_max_events, store.session_max_bytes, store.unwritten_wait)
        self.flusher = (Flusher(store.table, store.flush_interval, store.flush_max, store.max_unwritten,
                                store.counters, closed_sessions, backlog) if store.table else None)


class RedisEventStore(EventStore):
    """The default store. Options: the ring limits (``maxlen``, ``ttl``,
    ``session_max_events``, and ``session_max_bytes``: SESSION_MAX_BYTES, None for none), ``persist`` ("batched", "write_through", "off"),
    ``flush_interval`` (seconds, 0.2), ``flush_max`` (events, 500) and ``max_unwritten``
    (events, None: no limit; appends wait while this many are not in the database yet) for
    "batched", ``unwritten_wait`` (seconds, 30: the longest a session's appends wait for the
    database while its backlog of unwritten events is full), and ``approximate_trim`` (XADD
    MAXLEN ~: cheaper, keeps up to ~100 more events than maxlen)."""

    source = "redis"

    def __init__(self, *, persist: str = "batched", flush_interval: float = 0.2, flush_max: int = 500,
                 max_unwritten=None, unwritten_wait: float = 30.0, approximate_trim: bool = False, **ring):
        super().__init__(**ring)
        if persist not in PERSIST_MODES:
            raise ImproperlyConfigured(f"EVENT_STORE option persist must be one of {PERSIST_MODES}, not {persist!r}.")
        self.persist, self.approximate_trim = persist, approximate_trim
        self.flush_interval, self.flush_max, self.max_unwritten = flush_interval, flush_max, max_unwritten
        self.unwritten_wait = unwritten_wait
        self.table = EventTable() if persist != "off" else None
        self.counters = RedisCounters()
        self._loops = weakref.WeakKeyDictionary()

    @property
    def replays_evicted(self):
        return self.table is not None

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._loops.get(loop)
        if state is None:
            state = self._loops[loop] = _LoopState(self)
        return state

    # -- append ------------------------------------------------------------------------------

    async def append(self, session_id, stream_key, message, *, final=False, data=None):
        # Encoded here, so that a message that cannot be encoded fails its own append only.
        if data is None:
            data = dumps(message) if message is not None else b""
        item = _Append(session_id, stream_key, final, data)
        state = self._state()
        if state.flusher is not None:
            # Before the shared script call, so that only this session waits for its backlog.
            await state.flusher.admit(session_id, stream_key, len(data))
        return EventId(stream_key, await state.batcher.submit(item) or CLOSED_POSITION)

    async def _send(self, items) -> list:
        """One script call for a batch of appends; returns their positions in order."""
        limit = self.max_unwritten
        if limit and len(items) > limit:  # else the script could trim unwritten events of the batch
            return [position for start in range(0, len(items), limit)
                    for position in await self._send(items[start:start + limit])]
        names, state = StoreKeys(), self._state()
        positions = [None] * len(items)
        try:
            args, order = _script_args(self, names, items)
            if state.flusher is not None:
                await state.flusher.make_room(len(items))
            for index, position in zip(order, await state.append_script(keys=names.shared, args=args)):
                positions[index] = position
        finally:
            if state.flusher is not None:  # what makes no row is no longer unwritten (admit)
                state.flusher.release([(item.session_id, item.stream_key, None, item.data, item.final)
                                       for item, position in zip(items, positions) if not position])
        if self.table is not None:
            await self._persist([(item.session_id, item.stream_key, position, item.data, item.final)
                                 for item, position in zip(items, positions) if position], state)
        return positions

    async def _persist(self, rows, state):
        if self.persist == "write_through":
            # A refused row costs only itself; rows the failing database did not take are
            # retried by the flusher, as batched ones (Redis has them meanwhile).
            try:
                retry, refused = await self.table.run(persist.write_rows, rows)
            except BaseException:
                state.flusher.release(rows)
                raise
            waiting = {id(row) for row in retry}
            state.flusher.release([row for row in rows if id(row) not in waiting])
            state.flusher.count_refused(refused)
            if retry:
                state.flusher.add(retry)
            await state.flusher.forget_closed(rows)
        else:
            state.flusher.add(rows)

    async def flush(self):
        state = self._loops.get(asyncio.get_running_loop())
        if state is not None and state.flusher is not None:
            await state.flusher.flush()

    # -- reading -----------------------------------------------------------------------------

    async def read_after(self, session_id, stream_key, position):
        """Live tails call this after every doorbell. When Redis lost ``position`` (trimmed past
        a slow reader, or a flush), what follows it comes from the database, merged with Redis."""
        stream = StoreKeys().stream(session_id, stream_key)
        if position == "0-0":
            return _events(stream_key, await async_redis().xrange(stream, min="(0-0", max="+"))
        entries = await async_redis().xrange(stream, min=position, max="+")
        if entries and entries[0][0] == position:
            return _events(stream_key, entries[1:])
        newer = [event for event in _events(stream_key, entries) if event.id.sort_key > position_key(position)]
        if self.table is None:
            return newer
        rows = await self._settled_rows(persist.rows_after, session_id, stream_key, position, newer)
        return merge(rows, newer)

    async def read_all(self, session_id, stream_key):
        """Redis's ring, after the database's rows of what it trimmed (or lost: expired, flushed)."""
        kept = await self.read_after(session_id, stream_key, "0-0")
        if self.table is None:
            return kept
        return merge(await self._settled_rows(persist.rows_after, session_id, stream_key, "0-0", kept), kept)

    #: Times a numbered read asks Redis again when its oldest entry left the ring meanwhile.
    NUMBERED_ATTEMPTS = 3

    async def read_numbered(self, session_id, stream_key, first, start):
        """One script call while Redis's ring holds the stream's first entry: its length numbers
        the rest, read from the end back to ``start``'s predecessor (XREVRANGE ... COUNT), so a
        resume near the end reads next to nothing. Once the ring trimmed the first, the database
        (which has every event Redis trimmed: persist.Flusher.admit) counts its rows before
        Redis's oldest entry and gives the ones wanted, and the script the rest."""
        stream, first_data = StoreKeys().stream(session_id, stream_key), dumps(first).decode()
        script, begin, learnt, rows = self._state().numbered_script, max(start - 1, 0), [], []
        for _ in range(self.NUMBERED_ATTEMPTS):
            known, length, oldest, *rest = await script(keys=[stream], args=[first_data, start, *learnt])
            if known:
                offset, entries = rest[0], [_event(stream_key, entry_id, dict(zip(fields[::2], fields[1::2])))
                                            for entry_id, fields in reversed(rest[1:])]
                return numbered((rows if offset else []) + entries, start, begin, offset + length)
            if self.table is None:
                return None  # the first entry is gone, and there is no durable copy
            # Redis lost the stream (a flush, its ttl): the database has it all; else its rows
            # before Redis's oldest entry, the count of which numbers the ring.
            await self.flush()  # this process's own recent events first
            found = await self.table.run(_numbered_rows, session_id, stream_key, first, start,
                                         oldest if length else None)
            if found is None:
                return None
            count, rows = found
            if not length:
                return numbered(rows, start, begin, count)
            learnt = [count, oldest]
        return await super().read_numbered(session_id, stream_key, first, start)  # trimmed as fast as read

    async def replay_after(self, session_id, event_id):
        # Inclusive range: the first entry must be the id itself, or Redis does not have it.
        stream = StoreKeys().stream(session_id, event_id.stream)
        entries = await async_redis().xrange(stream, min=event_id.position, max="+")
        if entries and entries[0][0] == event_id.position:
            self.counters.add_soon({"replay_hits:redis": 1})
            return Replay(_events(event_id.stream, entries[1:]), "redis")
        return await self._replay_from_database(session_id, event_id, _events(event_id.stream, entries))

    async def _replay_from_database(self, session_id, event_id, newer):
        rows = None
        if self.table is not None:
            rows = await self._settled_rows(persist.replay_rows, session_id, event_id.stream, event_id.position,
                                            newer)
        if rows is None:
            reason = await self._why_missing(session_id, event_id)
            await self.counters.add({f"replay_failures:{reason}": 1})
            raise UnknownEvent(event_id, reason)
        self.counters.add_soon({"replay_hits:database": 1})
        return Replay(merge(rows, newer), "database")

    async def _settled_rows(self, read, session_id, stream_key, position, newer):
        """``read(session_id, stream_key, position)`` from the database, once it can stand in for
        what Redis lost. The events Redis lost may still wait in another process's batch (the
        last ones before a Redis failover always do), for up to ``settle_seconds()`` after they
        were appended. So read again (every ``SETTLE_POLL``) while the position itself is not
        there (``read`` returns None) but was appended recently enough to come still, or while
        the events older than Redis's oldest (``newer[0]``) may still be in a batch; positions
        are Redis's clock, and so is "now". Since every event this read can miss was appended
        before it began, it never waits longer than ``settle_seconds()`` in all."""
        loop = asyncio.get_running_loop()
        settle = self.settle_seconds()
        deadline = loop.time() + settle
        while True:
            await self.flush()  # this process's own recent events first
            rows = await self.table.run(read, session_id, stream_key, position)
            if loop.time() >= deadline:
                return rows
            settled_before = await self._redis_ms() - settle * 1000
            missing = rows is None and position_key(position)[0] > settled_before
            unsettled = bool(newer) and newer[0].id.sort_key[0] > settled_before
            if not (missing or unsettled):
                return rows
            await asyncio.sleep(self.SETTLE_POLL)

    #: Seconds between reads while the database catches up with the other processes' batches.
    SETTLE_POLL = 0.05
    #: Seconds a batch may take to be written once its flush is due (a loaded machine's loop
    #: and database are late by that much).
    WRITE_ALLOWANCE = 1.0
    #: The longest a read waits for other processes' batches, whatever ``flush_interval`` says.
    MAX_SETTLE = 2.0

    def settle_seconds(self) -> float:
        """How long after its append an event is surely in the database (or refused)."""
        batched = self.flush_interval if self.persist == "batched" else 0
        return min(batched + self.WRITE_ALLOWANCE, self.MAX_SETTLE)

    @staticmethod
    async def _redis_ms() -> int:
        seconds, microseconds = await async_redis().time()
        return seconds * 1000 + microseconds // 1000

    async def _why_missing(self, session_id, event_id) -> str:
        """"evicted" when the stream still exists and the id is older than its oldest entry."""
        first = await async_redis().xrange(StoreKeys().stream(session_id, event_id.stream), count=1)
        return missing_reason(first[0][0] if first else None, event_id.position)

    # -- the rest ----------------------------------------------------------------------------

    async def delete_session(self, session_id):
        await self.delete_sessions([session_id])

    async def delete_sessions(self, session_ids):
        """One round trip of script calls, one DELETE of rows, however many sessions."""
        names, state = StoreKeys(), self._state()
        # redis-py's Cluster pipelines refuse scripts, and a pipeline asks SCRIPT EXISTS first: one
        # session's (a DELETE) or a Cluster's go side by side instead, EVALSHA alone.
        if is_cluster() or len(session_ids) == 1:
            await asyncio.gather(*(state.delete_script(keys=[*names.shared, names.session_streams(session_id)])
                                   for session_id in session_ids))
        else:
            async with async_redis().pipeline(transaction=False) as pipe:
                for session_id in session_ids:
                    await state.delete_script(keys=[*names.shared, names.session_streams(session_id)], client=pipe)
                await pipe.execute()
        if self.table is not None:
            for session_id in session_ids:
                state.flusher.drop_session(session_id)
            await self.table.run(persist.delete_sessions_rows, session_ids)

    def sessions_events_key(self, session_id):
        # Its streams' set lives as long as its newest stream (APPEND_LUA: PEXPIRE with the stream).
        return StoreKeys().session_streams(session_id)

    async def buffered(self, session_ids):
        """Two round trips for any number of sessions: their stream sets, then the lengths."""
        names, client = StoreKeys(), async_redis()
        async with client.pipeline(transaction=False) as pipe:
            for session_id in session_ids:
                pipe.zrange(names.session_streams(session_id), 0, -1)
            streams = await pipe.execute() if session_ids else []
        wanted = [key for keys_of_session in streams for key in keys_of_session]
        lengths = dict(zip(wanted, await client.hmget(names.shared[1], wanted))) if wanted else {}
        return {session_id: {key.rsplit(":", 1)[1]: int(lengths[key] or 0) for key in keys_of_session}
                for session_id, keys_of_session in zip(session_ids, streams)}

    async def stats(self):
        names = StoreKeys()  # an append of nothing sweeps expired streams: TTL counts are current
        await self._state().append_script(keys=names.shared, args=_script_args(self, names, [])[0])
        return stats_from_counts(await self.counters.read())
