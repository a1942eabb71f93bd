"""The event store: every message sent on an SSE stream is appended here first.

It is the single source of truth for both live delivery and ``Last-Event-ID`` replay.
"""
from .base import EventStore, StoredEvent, UnknownEvent
from .redis import RedisEventStore

_stores = {}


def get_event_store() -> EventStore:
    from ..conf import get_config

    prefix = get_config()["KEY_PREFIX"]
    store = _stores.get(prefix)
    if store is None:
        store = _stores[prefix] = RedisEventStore()
    return store


__all__ = ["EventStore", "RedisEventStore", "StoredEvent", "UnknownEvent", "get_event_store"]
