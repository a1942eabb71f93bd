"""conf: defaults, override_settings, unknown keys, redis_url()."""
import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from mcp_transport import conf
from mcp_transport.conf import DEFAULTS, get_config, redis_url


def test_empty_setting_gives_defaults():
    with override_settings(MCP_TRANSPORT={}):
        assert get_config() == DEFAULTS


def test_missing_setting_gives_defaults():
    with override_settings():
        del settings.MCP_TRANSPORT  # sends no setting_changed: clear by hand, before and after
        get_config.cache_clear()
        try:
            assert get_config() == DEFAULTS
        finally:
            get_config.cache_clear()


def test_some_defaults():
    with override_settings(MCP_TRANSPORT={}):
        config = get_config()
    assert config["PAGE_SIZE"] == 100
    assert config["KEY_PREFIX"] == "mcp"
    assert config["ALLOWED_ORIGINS"] == []
    assert config["ALLOW_LOOPBACK_ORIGINS"] is True
    assert config["SSE_RETRY_MS"] == 1000
    assert config["DEFAULT_LOG_LEVEL"] == "info"
    assert config["REDIS_URL"] is None
    assert config["CACHE_ALIAS"] == "default"


def test_project_settings_are_merged_over_defaults():
    config = get_config()
    assert config["SERVER_NAME"] == settings.MCP_TRANSPORT["SERVER_NAME"] == "com.example/django-mcp-transport-example"
    assert config["STREAM_MAXLEN"] == DEFAULTS["STREAM_MAXLEN"]  # not set by the project
    assert set(config) == set(DEFAULTS)


def test_compatibility_with_override_settings():
    """As DRF's test of the same name: overrides take effect, then are undone."""
    before = get_config()
    assert before["PAGE_SIZE"] == 100
    with override_settings(MCP_TRANSPORT={"PAGE_SIZE": 2, "SERVER_NAME": "other"}):
        assert get_config()["PAGE_SIZE"] == 2
        assert get_config()["SERVER_NAME"] == "other"
        assert get_config()["KEY_PREFIX"] == "mcp"  # the rest are defaults
    assert get_config()["PAGE_SIZE"] == 100
    assert get_config() == before


def test_override_settings_as_decorator():
    @override_settings(MCP_TRANSPORT={"SSE_RETRY_MS": None})
    def read():
        return get_config()["SSE_RETRY_MS"]

    assert read() is None
    assert get_config()["SSE_RETRY_MS"] == 1000


def test_settings_fixture(settings):
    settings.MCP_TRANSPORT = {"KEEPALIVE_SECONDS": 1}
    assert get_config()["KEEPALIVE_SECONDS"] == 1


def test_config_is_cached():
    assert get_config() is get_config()


def test_unknown_key_raises():
    with override_settings(MCP_TRANSPORT={"PAGE_SIZE": 5, "PAGESIZE": 5, "ALLOWED_ORIGIN": []}):
        with pytest.raises(ImproperlyConfigured) as info:
            get_config()
    assert str(info.value) == "Unknown MCP_TRANSPORT keys: ALLOWED_ORIGIN, PAGESIZE."
    get_config()  # fine again afterwards


def test_redis_url_from_key():
    with override_settings(MCP_TRANSPORT={"REDIS_URL": "redis://elsewhere:6390/3"}):
        assert redis_url() == "redis://elsewhere:6390/3"


def test_redis_url_from_default_cache():
    with override_settings(MCP_TRANSPORT={}):
        assert redis_url() == settings.CACHES["default"]["LOCATION"]


def cache(location):
    return {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": location}


def test_redis_url_from_cache_alias_and_location_list():
    caches = {"default": cache("redis://default:1/0"),
              "mcp": cache(["redis://primary:6379/1", "redis://replica:6379/1"])}
    with override_settings(CACHES=caches, MCP_TRANSPORT={"CACHE_ALIAS": "mcp"}):
        assert redis_url() == "redis://primary:6379/1"
    with override_settings(CACHES=caches, MCP_TRANSPORT={}):
        assert redis_url() == "redis://default:1/0"


def test_redis_url_follows_caches_override():
    with override_settings(MCP_TRANSPORT={}):
        first = redis_url()
        with override_settings(CACHES={"default": cache("redis://changed:1/2")}):
            assert redis_url() == "redis://changed:1/2"
        assert redis_url() == first


def test_redis_url_key_wins_over_cache():
    with override_settings(CACHES={"default": cache("redis://cache:1/0")},
                           MCP_TRANSPORT={"REDIS_URL": "redis://key:1/0"}):
        assert redis_url() == "redis://key:1/0"


def test_reset_ignores_other_settings():
    config = get_config()
    with override_settings(TIME_ZONE="Europe/Paris"):
        assert conf.get_config() is config
