"""The event-store API, and the rules every backend shares.

A stream lives inside one session; event ids never cross sessions: "Event IDs SHOULD encode
sufficient information to identify the originating stream" -- spec 2025-11-25
basic/transports, and a stream key is only looked up inside the session presenting the id.

Each stream is a ring: it keeps its last ``maxlen`` events, for ``ttl`` seconds after its last
event, whichever limit bites first; and a session keeps at most ``session_max_events`` events
across all its streams, and at most ``session_max_bytes`` bytes of messages (their compact
JSON, ``jsonrpc.dumps``; a priming event counts 0): above either, its oldest events go first,
the new one too when it alone is larger. What falls out is an *eviction*, counted by reason:
``capacity`` (maxlen), ``ttl``, ``session_cap`` (both session limits).

Positions inside a stream are ``<ms>-<seq>`` (Redis stream entry ids, or the same rule applied
by the other backends), so they order the same way everywhere.
"""
import time
from dataclasses import dataclass
from typing import Optional

from django.core.exceptions import ImproperlyConfigured

from ..protocol.ids import EventId

#: Why events leave a ring.
EVICTION_REASONS = ("capacity", "ttl", "session_cap")
#: Why a replay found nothing to serve.
FAILURE_REASONS = ("unknown", "evicted")
#: Where a replay was served from.
REPLAY_SOURCES = ("redis", "database", "memory")


class UnknownEvent(Exception):
    """The event id names no event this session can replay.

    ``reason`` is ``"evicted"`` when the stream still exists but the id is older than the oldest
    event it keeps, ``"unknown"`` otherwise: never issued, another session's or another
    stream's id, or a stream that is gone as a whole."""

    def __init__(self, event_id, reason: str = "unknown"):
        super().__init__(f"{event_id} ({reason})")
        self.event_id = str(event_id)
        self.reason = reason


@dataclass(frozen=True)
class StoredEvent:
    id: EventId
    #: The JSON-RPC message; None for a priming event or a terminal marker.
    message: Optional[dict]
    #: The last event of a POST stream (its response, or the end of a cancelled request).
    final: bool = False


@dataclass(frozen=True)
class Numbered:
    """A stream's entries numbered from its first ever (``EventStore.read_numbered``)."""

    #: The entries from index ``start`` on, in order.
    events: list
    #: The entry at ``start - 1`` (None for 0, or past the end): its id and whether it was final;
    #: its message may be left unread (None).
    previous: Optional[StoredEvent]
    #: How many entries the stream has had so far (the index of its next one).
    count: int


def numbered(entries: list, start: int, begin: int = 0, count: Optional[int] = None) -> Numbered:
    """``Numbered`` from ``start`` of ``entries``, the stream's from index ``begin`` on (to its
    last: ``count`` is then ``begin + len(entries)`` unless given)."""
    at = start - begin
    previous = entries[at - 1] if 0 < at <= len(entries) else None
    return Numbered(entries[max(at, 0):], previous, begin + len(entries) if count is None else count)


class Replay(list):
    """The events of a replay, in order (a plain list), and ``source``: where they came from."""

    def __init__(self, events=(), source: str = "redis"):
        super().__init__(events)
        self.source = source


def position_key(position: str) -> tuple:
    """``"<ms>-<seq>"`` as a tuple of ints, the order positions have."""
    ms, seq = position.split("-")
    return int(ms), int(seq)


def next_position(last: Optional[tuple], now_ms: int) -> tuple:
    """The position after ``last`` (``(ms, seq)`` or None): Redis's own rule for entry ids, so
    positions grow even when the clock goes back."""
    if last is None or now_ms > last[0]:
        return now_ms, 0
    return last[0], last[1] + 1


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def missing_reason(first_position, position: str) -> str:
    """Why a stream has no event at ``position``: "evicted" when it is older than the stream's
    oldest kept event (``first_position``, None for an empty or missing stream)."""
    if first_position is not None and position_key(first_position) > position_key(position):
        return "evicted"
    return "unknown"


def merge(*sources) -> list:
    """Events of several lists in position order, each position once (the first copy wins)."""
    unique = {}
    for events in sources:
        for event in events:
            unique.setdefault(event.id.position, event)
    return sorted(unique.values(), key=lambda event: event.id.sort_key)


def _limit(value, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ImproperlyConfigured(f"EVENT_STORE option {name} must be a positive integer, not {value!r}.")
    return value


def _byte_limit(value):
    if value is None:
        return None
    return _limit(value, "session_max_bytes")


def empty_stats() -> dict:
    return {"buffer_entries": 0, "events_appended": 0,
            "evicted": dict.fromkeys(EVICTION_REASONS, 0),
            "replay_hits": dict.fromkeys(REPLAY_SOURCES, 0),
            "replay_failures": dict.fromkeys(FAILURE_REASONS, 0)}


def stats_from_counts(counts: dict) -> dict:
    """The nested ``stats()`` shape from flat counter names (``events_evicted:ttl``, ...)."""
    stats = empty_stats()
    for name in ("buffer_entries", "events_appended"):
        stats[name] = counts.get(name, 0)
    for group, prefix in (("evicted", "events_evicted"), ("replay_hits", "replay_hits"),
                          ("replay_failures", "replay_failures")):
        for key in stats[group]:
            stats[group][key] = counts.get(f"{prefix}:{key}", 0)
    return stats


class EventStore:
    """What the consumer and the request tasks need from a store. Every method is async.

    Options (``MCP_TRANSPORT["EVENT_STORE"]["OPTIONS"]``) are keyword arguments; the ring
    limits default to ``STREAM_MAXLEN``, ``STREAM_TTL``, ``SESSION_MAX_EVENTS`` and
    ``SESSION_MAX_BYTES`` (``session_max_bytes``: None for no byte limit).
    """

    #: Where replays served from this store's own buffer come from (``Replay.source``).
    source = "redis"
    #: True when events trimmed from the ring stay replayable from a durable copy.
    replays_evicted = False

    def __init__(self, *, maxlen: Optional[int] = None, ttl: Optional[int] = None,
                 session_max_events: Optional[int] = None, session_max_bytes="default"):
        from ..conf import get_config

        config = get_config()
        self.maxlen = _limit(config["STREAM_MAXLEN"] if maxlen is None else maxlen, "maxlen")
        self.ttl = _limit(config["STREAM_TTL"] if ttl is None else ttl, "ttl")
        cap = config["SESSION_MAX_EVENTS"] if session_max_events is None else session_max_events
        self.session_max_events = _limit(cap, "session_max_events")
        self.session_max_bytes = _byte_limit(config["SESSION_MAX_BYTES"] if session_max_bytes == "default"
                                             else session_max_bytes)

    async def append(self, session_id: str, stream_key: str, message: Optional[dict], *,
                     final: bool = False, data: Optional[bytes] = None) -> EventId:
        """Store one event and ring the stream's doorbell; returns the new event's id.

        ``data``, when given, is ``jsonrpc.dumps(message)`` (b"" for None), already encoded by
        the caller for the wire: a store that keeps JSON text may use it instead of encoding again."""
        raise NotImplementedError("EventStore.append() must be implemented")

    async def read_after(self, session_id: str, stream_key: str, position: str) -> list:
        """Events of the stream strictly after ``position`` ("0-0" for all), in order."""
        raise NotImplementedError("EventStore.read_after() must be implemented")

    async def read_all(self, session_id: str, stream_key: str) -> list:
        """Every event of the stream the store still keeps, oldest first, a durable copy's
        included: what its ring trimmed and the database still holds comes first."""
        return await self.read_after(session_id, stream_key, "0-0")

    async def read_numbered(self, session_id: str, stream_key: str, first: dict, start: int) -> Optional[Numbered]:
        """The stream's entries from the ``start``-th on, numbered from its first ever, which
        holds the message ``first`` (a task's opening: tasks/stream's ``seq`` is the index); None
        when the store no longer has that one (nor, then, the numbering). A store reads what
        it returns, not the stream before it (a resume at the end of a long stream reads next
        to nothing): the Redis and database stores; this one reads it all."""
        kept = await self.read_all(session_id, stream_key)
        if not kept or kept[0].message != first:
            return None
        return numbered(kept, start)

    async def replay_after(self, session_id: str, event_id: EventId) -> Replay:
        """Events strictly after ``event_id`` in its stream, in order, as a ``Replay``.

        Raises UnknownEvent (with a reason) when the id is not an event of this session's
        stream that the store still has."""
        raise NotImplementedError("EventStore.replay_after() must be implemented")

    async def delete_session(self, session_id: str) -> None:
        """Drop every event of the session, everywhere the store keeps them (DELETE)."""
        raise NotImplementedError("EventStore.delete_session() must be implemented")

    async def delete_sessions(self, session_ids: list) -> None:
        """``delete_session()`` for many sessions (the cleanup); stores may do it in bulk."""
        for session_id in session_ids:
            await self.delete_session(session_id)

    def sessions_events_key(self, session_id: str):
        """A Redis key that exists while the store keeps events of the session, or None if the
        store cannot say: a close deletes the events of a session only where it has some."""
        return None

    async def buffered(self, session_ids) -> dict:
        """What the store keeps of each session: ``{session id: {stream key: events}}``, for
        the admin. A store that cannot tell returns ``{}``."""
        return {}

    async def stats(self) -> dict:
        """``buffer_entries``, ``events_appended`` and, by reason or source, ``evicted``,
        ``replay_hits`` and ``replay_failures`` (the shape of ``empty_stats()``)."""
        raise NotImplementedError("EventStore.stats() must be implemented")

    async def flush(self) -> None:
        """Write events still waiting for the database now (nothing to do by default)."""
