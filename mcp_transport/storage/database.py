"""Database event store: every event is a row of ``models.StoredEvent``, with no Redis buffer.

For deployments that want one durable store and can afford a few queries per event. Every ORM
call runs on the store's own thread (persist.EventTable), so the loop never waits on it.

Positions follow Redis's rule for entry ids, ``<ms>-<seq>``: the clock's ms, or the stream's
last ms with the next seq when the clock has not moved on. An append reads the stream's last
position and inserts the next one in a transaction; when two processes race for the same
position, the unique constraint rejects the second insert, which retries with the position
after the winner's. So positions are unique and increasing per stream across processes.

Ring limits, checked on append: rows beyond ``maxlen`` are deleted; a stream whose last event
is older than ``ttl`` is deleted when next touched (TTL evictions are counted then); above
``session_max_events`` rows or ``session_max_bytes`` (each row's ``size``; one COUNT and SUM per
append) the session's expired streams go first, then its oldest rows. Counters and doorbells go
to Redis, in one round trip per append.
"""
from collections import Counter

from django.db import IntegrityError, transaction
from django.db.models import Count, Max, Sum

from ..protocol.ids import EventId
from ..protocol.jsonrpc import dumps
from . import persist
from .base import (EventStore, Replay, UnknownEvent, missing_reason, next_position, now_ms, numbered,
                   stats_from_counts)
from .persist import EventTable
from .signals import RedisCounters, closed_sessions, evictions, ring

#: Attempts at an append whose position another process took first.
_ATTEMPTS = 5


class DatabaseEventStore(EventStore):
    source = "database"

    def __init__(self, **ring_limits):
        super().__init__(**ring_limits)
        self.table = EventTable()
        self.counters = RedisCounters()

    async def append(self, session_id, stream_key, message, *, final=False, data=None):
        size = len(data if data is not None else dumps(message) if message is not None else b"")
        position, evicted = await self.table.run(self._append, session_id, stream_key, message, final, size)
        if await closed_sessions([session_id]):
            # Its DELETE came while this append ran: it may have deleted the rows before this
            # one was in, and a closed session keeps none (the close marks it before deleting).
            await self.table.run(persist.delete_sessions_rows, [session_id])
            return EventId(stream_key, "0-0")
        await ring(session_id, stream_key, {"events_appended": 1, **evictions(evicted)})
        return EventId(stream_key, position)

    async def read_after(self, session_id, stream_key, position):
        events, expired = await self.table.run(self._read_after, session_id, stream_key, position)
        await self.counters.add(evictions({"ttl": expired}))
        return events

    async def read_numbered(self, session_id, stream_key, first, start):
        """Two queries that read what they return: the stream's count, then its last rows."""
        found, expired = await self.table.run(self._numbered, session_id, stream_key, first, start)
        await self.counters.add(evictions({"ttl": expired}))
        if found is None:
            return None
        count, rows = found
        return numbered(rows, start, max(start - 1, 0), count)

    async def replay_after(self, session_id, event_id):
        found, expired = await self.table.run(self._replay, session_id, event_id.stream, event_id.position)
        if isinstance(found, str):
            await self.counters.add({f"replay_failures:{found}": 1, **evictions({"ttl": expired})})
            raise UnknownEvent(event_id, found)
        await self.counters.add({"replay_hits:database": 1, **evictions({"ttl": expired})})
        return Replay(found, self.source)

    async def delete_session(self, session_id):
        await self.delete_sessions([session_id])

    async def delete_sessions(self, session_ids):
        deleted = await self.table.run(persist.delete_sessions_rows, session_ids)
        await self.counters.add({"events_deleted": deleted})

    async def buffered(self, session_ids):
        return await self.table.run(persist.stream_counts, session_ids) if session_ids else {}

    async def stats(self):
        kept = await self.table.run(lambda: persist.all_rows().count())
        return stats_from_counts({**await self.counters.read(), "buffer_entries": kept})

    # -- on the table's thread -------------------------------------------------------------

    def _append(self, session_id, stream_key, message, final, size):
        for attempt in range(_ATTEMPTS):
            try:
                with transaction.atomic():
                    return self._insert(session_id, stream_key, message, final, size)
            except IntegrityError:
                if attempt == _ATTEMPTS - 1:
                    raise

    def _insert(self, session_id, stream_key, message, final, size):
        rows, evicted = self._fresh_rows(session_id, stream_key)
        last = rows.order_by("-position_ms", "-position_seq").values_list("position_ms", "position_seq").first()
        # A stream with no rows may have just lost them all (an event over the byte cap takes the
        # session's rows with it, in this very ms): as Redis does, a new one starts at the next
        # ms, so no position is given out twice.
        position = "%d-%d" % (next_position(last, now_ms()) if last else (now_ms() + 1, 0))
        persist.insert_row(session_id, stream_key, position, message, final, size)
        evicted["capacity"] = _trim_stream(rows, self.maxlen)
        evicted.update(self._trim_session(session_id))
        return position, evicted

    def _fresh_rows(self, session_id, stream_key):
        """The stream's rows, deleted first when the stream expired (counted as "ttl")."""
        rows = persist.stream_rows(session_id, stream_key)
        last = rows.aggregate(last=Max("position_ms"))["last"]
        expired = rows.delete()[0] if last is not None and last < self._cutoff() else 0
        return rows, Counter(ttl=expired)

    def _cutoff(self) -> int:
        return now_ms() - self.ttl * 1000

    def _trim_session(self, session_id) -> Counter:
        session = persist.all_rows().filter(session_id=session_id)
        excess = self._excess(session)
        if excess == (0, 0):
            return Counter()
        stale = session.values("stream").annotate(last=Max("position_ms")).filter(last__lt=self._cutoff())
        evicted = Counter(ttl=session.filter(stream__in=[row["stream"] for row in stale]).delete()[0])
        if evicted["ttl"]:
            excess = self._excess(session)
        evicted["session_cap"] = _delete(session, _oldest_beyond(session, *excess))
        return evicted

    def _excess(self, session) -> tuple:
        """(rows, bytes) the session keeps beyond its caps, each 0 when within."""
        totals = session.aggregate(rows=Count("pk"), bytes=Sum("size"))
        rows = max(0, totals["rows"] - self.session_max_events)
        if self.session_max_bytes is None:
            return rows, 0
        return rows, max(0, (totals["bytes"] or 0) - self.session_max_bytes)

    def _read_after(self, session_id, stream_key, position):
        rows, evicted = self._fresh_rows(session_id, stream_key)
        return persist.events(persist.after(rows, position), stream_key), evicted["ttl"]

    def _numbered(self, session_id, stream_key, first, start):
        rows, evicted = self._fresh_rows(session_id, stream_key)
        return persist.numbered_rows(rows, stream_key, first, start), evicted["ttl"]

    def _replay(self, session_id, stream_key, position):
        """The events after ``position``, or why there are none; and the TTL evictions."""
        rows, evicted = self._fresh_rows(session_id, stream_key)
        if rows.filter(position=position).exists():
            return persist.events(persist.after(rows, position), stream_key), evicted["ttl"]
        return missing_reason(persist.oldest_position(rows), position), evicted["ttl"]


def _trim_stream(rows, maxlen) -> int:
    """Delete the rows older than the stream's newest ``maxlen``."""
    return _delete(rows, rows.order_by("-position_ms", "-position_seq").values_list("pk", flat=True)[maxlen:])


#: Rows read at a time while choosing which of a session's oldest to evict for its byte cap.
_CHUNK = 256


def _oldest_beyond(session, rows: int, size: int) -> list:
    """The pks of the session's oldest rows, as few as take ``rows`` rows and ``size`` bytes."""
    chosen, freed = [], 0
    oldest = session.order_by("position_ms", "position_seq").values_list("pk", "size")
    while len(chosen) < rows or freed < size:
        chunk = list(oldest[len(chosen):len(chosen) + max(_CHUNK, rows - len(chosen))])
        for pk, row_size in chunk:
            if len(chosen) >= rows and freed >= size:
                break
            chosen.append(pk)
            freed += row_size
        if len(chunk) < _CHUNK:
            break
    return chosen


def _delete(rows, pks) -> int:
    pks = list(pks)
    return rows.filter(pk__in=pks).delete()[0] if pks else 0
