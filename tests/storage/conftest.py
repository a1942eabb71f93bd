"""Fixtures of the event-store tests: every backend, real Redis, the real database.

Each test gets a key prefix of its own, so the counters in ``{prefix}:metrics`` are exact.
"""
import secrets

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils.module_loading import import_string

from mcp_transport.protocol.ids import new_session_id, new_stream_key

BACKENDS = {
    "memory": "mcp_transport.storage.memory.InMemoryEventStore",
    "database": "mcp_transport.storage.database.DatabaseEventStore",
    "redis": "mcp_transport.storage.redis.RedisEventStore",
    # The same store on a Sentinel-managed master and on a Redis Cluster (tests/conftest.py).
    "redis-sentinel": "mcp_transport.storage.redis.RedisEventStore",
    "redis-cluster": "mcp_transport.storage.redis.RedisEventStore",
}
TOPOLOGIES = {"redis-sentinel": "sentinel_set", "redis-cluster": "redis_cluster"}


@pytest.fixture(autouse=True)
def own_prefix():
    prefix = f"{settings.MCP_TRANSPORT['KEY_PREFIX']}-{secrets.token_hex(3)}"
    with override_settings(MCP_TRANSPORT={**settings.MCP_TRANSPORT, "KEY_PREFIX": prefix}):
        yield prefix


@pytest.fixture
def stores():
    """Builds stores; shuts their database threads down afterwards."""
    made = []

    def build(backend="redis", **options):
        store = import_string(BACKENDS.get(backend, backend))(**options)
        made.append(store)
        return store

    yield build
    for store in made:
        if getattr(store, "table", None) is not None:
            store.table.close()


@pytest.fixture(params=list(BACKENDS))
def backend(request):
    """The backend's name; for a Redis topology the app's REDIS_URL points at it meanwhile."""
    if request.param not in TOPOLOGIES:
        yield request.param
        return
    topology = request.getfixturevalue(TOPOLOGIES[request.param])
    with override_settings(MCP_TRANSPORT={**settings.MCP_TRANSPORT, "REDIS_URL": topology.url}):
        yield request.param


@pytest.fixture
def make_store(stores, backend):
    """``make_store(**options)``: a store of the backend under test."""
    return lambda **options: stores(backend, **options)


@pytest.fixture
def store(make_store):
    return make_store()


@pytest.fixture
def session_id():
    return new_session_id()


@pytest.fixture
def stream_key():
    return new_stream_key()

