"""EVENT_STORE: the backend by dotted path plus options, built once per configuration, rebuilt
when settings change; the ring limits default to STREAM_MAXLEN, STREAM_TTL, SESSION_MAX_EVENTS."""
import pytest
from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from mcp_transport.checks import event_store_check
from mcp_transport.storage import (DatabaseEventStore, InMemoryEventStore, RedisEventStore, get_event_store)

MEMORY = {"BACKEND": "mcp_transport.storage.memory.InMemoryEventStore", "OPTIONS": {"maxlen": 7}}


def configured(**keys):
    return override_settings(MCP_TRANSPORT={**settings.MCP_TRANSPORT, **keys})


def test_default_is_the_redis_store_with_batched_persistence():
    with override_settings(MCP_TRANSPORT={}):
        store = get_event_store()
    assert type(store) is RedisEventStore
    assert (store.persist, store.maxlen, store.ttl, store.session_max_events) == ("batched", 1000, 3600, 10000)


def test_ring_limits_default_to_the_old_keys():
    with configured(STREAM_MAXLEN=50, STREAM_TTL=60, SESSION_MAX_EVENTS=500):
        store = get_event_store()
    assert (store.maxlen, store.ttl, store.session_max_events) == (50, 60, 500)


def test_options_win_over_the_old_keys():
    with configured(STREAM_MAXLEN=50, EVENT_STORE={"OPTIONS": {"maxlen": 5, "persist": "off"}}):
        store = get_event_store()
    assert (type(store), store.maxlen, store.persist, store.table) == (RedisEventStore, 5, "off", None)


@pytest.mark.parametrize("backend, cls", [("mcp_transport.storage.memory.InMemoryEventStore", InMemoryEventStore),
                                          ("mcp_transport.storage.database.DatabaseEventStore", DatabaseEventStore)])
def test_backend_by_dotted_path(backend, cls):
    with configured(EVENT_STORE={"BACKEND": backend, "OPTIONS": {"ttl": 9}}):
        store = get_event_store()
    assert type(store) is cls and store.ttl == 9


def test_one_store_per_configuration_rebuilt_when_settings_change():
    with configured(EVENT_STORE=MEMORY):
        store = get_event_store()
        assert get_event_store() is store
    with configured(EVENT_STORE=MEMORY):
        assert get_event_store() is not store  # setting_changed cleared the cache
        assert get_event_store().maxlen == 7


@pytest.mark.parametrize("options", [{"persist": "sometimes"}, {"maxlen": 0}, {"ttl": "1"}, {"session_max_events": -1}])
def test_bad_options_are_refused(options):
    with configured(EVENT_STORE={"OPTIONS": options}):
        with pytest.raises(ImproperlyConfigured):
            get_event_store()


def test_a_store_that_cannot_be_built_is_e002():
    for broken in ({"BACKEND": "mcp_transport.storage.nowhere.Store"}, {"OPTIONS": {"maxlenn": 3}}):
        with configured(EVENT_STORE=broken):
            (error,) = event_store_check(None)
            ours = [m.id for m in checks.run_checks() if m.id.startswith("mcp_transport.")]
            assert [i for i in ours if i != "mcp_transport.W007"] == ["mcp_transport.E002"]  # W007: auth off
        assert error.id == "mcp_transport.E002" and error.is_serious()


def test_the_project_store_passes_the_check():
    assert event_store_check(None) == []
