"""The event store: every message sent on an SSE stream is appended here first.

It is the single source of truth for both live delivery and ``Last-Event-ID`` replay. The
backend is chosen in settings by dotted path plus keyword arguments, as Channels does
(``backend_class(**config)``)::

    MCP_TRANSPORT = {"EVENT_STORE": {
        "BACKEND": "mcp_transport.storage.redis.RedisEventStore",    # the default
        "OPTIONS": {"maxlen": 1000, "ttl": 3600, "persist": "batched"},
    }}

Backends: ``redis.RedisEventStore`` (Redis, with the database as the durable record),
``database.DatabaseEventStore`` (the database only), ``memory.InMemoryEventStore`` (one process:
tests and development).
"""
import asyncio
import logging

from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from .base import EventStore, Numbered, Replay, StoredEvent, UnknownEvent
from .database import DatabaseEventStore
from .memory import InMemoryEventStore
from .redis import RedisEventStore

logger = logging.getLogger(__name__)

#: Stores by (backend, options), so that each configuration is built once per process.
_stores = {}
#: The EVENT_STORE setting last looked up and its store: every event appended asks for the store.
_last = (None, None)


def _freeze(value):
    if isinstance(value, dict):
        return tuple(sorted((key, _freeze(item)) for key, item in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(item) for item in value)
    return value


def get_event_store() -> EventStore:
    """The store ``MCP_TRANSPORT["EVENT_STORE"]`` names, built once per configuration."""
    from ..conf import DEFAULTS, get_config

    global _last
    config = get_config()["EVENT_STORE"]
    if _last[0] is config:
        return _last[1]
    backend = config.get("BACKEND", DEFAULTS["EVENT_STORE"]["BACKEND"])
    options = config.get("OPTIONS", {})
    key = (backend, _freeze(options))
    store = _stores.get(key)
    if store is None:
        store = _stores[key] = import_string(backend)(**options)
    _last = (config, store)
    return store


async def flush_all() -> None:
    """Write what every store of this process still holds for the database (a clean shutdown).

    Twice, a moment apart: an append whose script call is in flight hands its rows over when
    the call returns."""
    for _round in range(2):
        await asyncio.sleep(0.05)
        for store in list(_stores.values()):
            try:
                await store.flush()
            except Exception:
                logger.exception("flushing %s at shutdown failed", type(store).__name__)


@receiver(setting_changed)
def _reset(*, setting, **kwargs):
    # Options default to other MCP_TRANSPORT keys (STREAM_MAXLEN, ...): rebuild on any change.
    global _last
    if setting in ("MCP_TRANSPORT", "CACHES", "DATABASES"):
        _stores.clear()
        _last = (None, None)


__all__ = ["DatabaseEventStore", "EventStore", "InMemoryEventStore", "Numbered", "RedisEventStore", "Replay",
           "StoredEvent", "UnknownEvent", "get_event_store"]
