"""In-memory event store: for tests and single-process development, never for production.

Events live in this process only, so a resume that reaches another process finds nothing, and a
restart loses everything. The ring limits are enforced as in the other stores: ``maxlen`` per
stream, ``ttl`` after a stream's last event (checked whenever the session is touched and by
``stats()``), and ``session_max_events`` and ``session_max_bytes`` by evicting the session's
oldest events. Doorbells are still published on Redis, where live tails listen (bell.py).
"""
import time
from collections import Counter, deque

from ..protocol.ids import EventId
from ..protocol.jsonrpc import dumps
from .base import (EventStore, Replay, StoredEvent, UnknownEvent, missing_reason, next_position, now_ms,
                   position_key, stats_from_counts)
from .signals import LocalCounters, evictions, ring


class _Ring:
    """One stream: its kept events with their sizes, its last position, and when it expires."""

    def __init__(self):
        self.events = deque()
        self.sizes = deque()  # bytes of each event's message, as SESSION_MAX_BYTES counts them
        self.bytes = 0
        self.last = None
        self.expires_at = 0.0

    def add(self, event, size):
        self.events.append(event)
        self.sizes.append(size)
        self.bytes += size

    def drop_oldest(self):
        self.events.popleft()
        self.bytes -= self.sizes.popleft()


class InMemoryEventStore(EventStore):
    source = "memory"

    def __init__(self, **ring_limits):
        super().__init__(**ring_limits)
        #: session id -> stream key -> _Ring
        self._sessions = {}
        self.counters = LocalCounters()

    async def append(self, session_id, stream_key, message, *, final=False, data=None):
        evicted = Counter()
        streams = self._live(session_id, evicted)
        stream = streams.setdefault(stream_key, _Ring())
        stream.last = next_position(stream.last, now_ms())
        event_id = EventId(stream_key, "%d-%d" % stream.last)
        if data is None:
            data = dumps(message) if message is not None else b""
        stream.add(StoredEvent(event_id, message, final), len(data))
        stream.expires_at = time.monotonic() + self.ttl
        while len(stream.events) > self.maxlen:
            stream.drop_oldest()
            evicted["capacity"] += 1
        self._enforce_cap(streams, evicted)
        await self.counters.add({"events_appended": 1, **evictions(evicted)})
        await ring(session_id, stream_key)
        return event_id

    def _live(self, session_id, evicted) -> dict:
        """The session's streams, without the expired ones (counted as TTL evictions)."""
        streams = self._sessions.setdefault(session_id, {})
        now = time.monotonic()
        for key in [key for key, stream in streams.items() if stream.expires_at <= now]:
            evicted["ttl"] += len(streams.pop(key).events)
        return streams

    def _enforce_cap(self, streams, evicted):
        """The session's oldest events go while it keeps too many of them or too many bytes."""
        count = sum(len(stream.events) for stream in streams.values())
        size = sum(stream.bytes for stream in streams.values())
        byte_cap = self.session_max_bytes
        while count > self.session_max_events or (byte_cap is not None and size > byte_cap):
            oldest = min((s for s in streams.values() if s.events), key=lambda s: s.events[0].id.sort_key)
            size -= oldest.sizes[0]
            oldest.drop_oldest()
            count -= 1
            evicted["session_cap"] += 1

    async def read_after(self, session_id, stream_key, position):
        stream = await self._stream(session_id, stream_key)
        return [event for event in stream.events if event.id.sort_key > position_key(position)]

    async def replay_after(self, session_id, event_id):
        stream = await self._stream(session_id, event_id.stream)
        kept = list(stream.events)
        for index, event in enumerate(kept):
            if event.id == event_id:
                await self.counters.add({"replay_hits:memory": 1})
                return Replay(kept[index + 1:], self.source)
        reason = missing_reason(kept[0].id.position if kept else None, event_id.position)
        await self.counters.add({f"replay_failures:{reason}": 1})
        raise UnknownEvent(event_id, reason)

    async def _stream(self, session_id, stream_key) -> _Ring:
        evicted = Counter()
        stream = self._live(session_id, evicted).get(stream_key, _Ring())
        await self.counters.add(evictions(evicted))
        return stream

    async def delete_session(self, session_id):
        streams = self._sessions.pop(session_id, {})
        await self.counters.add({"events_deleted": sum(len(stream.events) for stream in streams.values())})

    async def buffered(self, session_ids):
        return {session_id: {key: len(stream.events) for key, stream in self._sessions.get(session_id, {}).items()}
                for session_id in session_ids}

    async def stats(self):
        evicted = Counter()
        for session_id in list(self._sessions):
            self._live(session_id, evicted)
        await self.counters.add(evictions(evicted))
        kept = sum(len(stream.events) for streams in self._sessions.values() for stream in streams.values())
        return stats_from_counts({**await self.counters.read(), "buffer_entries": kept})
