"""Where Redis is: redis://, redis+sentinel://, redis+cluster:// and MCP_TRANSPORT['REDIS']
(connections.redis_target), and the example project's cache and broker built from them."""
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from mcp_transport.connections import RedisTarget, keys, parse_redis_url, redis_target, structured_target


def test_a_plain_url_is_one_server():
    assert parse_redis_url("redis://h:6380/2") == RedisTarget("single", url="redis://h:6380/2")


def test_a_sentinel_url_names_the_sentinels_the_master_and_the_database():
    target = parse_redis_url("redis+sentinel://:pw@a:26379,b:26380,[::1]:26381/mymaster/3?sentinel_password=s")
    assert target == RedisTarget("sentinel", nodes=(("a", 26379), ("b", 26380), ("::1", 26381)), master="mymaster",
                                 db=3, options={"password": "pw"}, sentinel_options={"password": "s"})
    assert parse_redis_url("redis+sentinel://a:1/m").db == 0


def test_a_cluster_url_names_its_seed_nodes():
    target = parse_redis_url("redis+cluster://user:pw@a:7000,b:7001")
    assert target == RedisTarget("cluster", nodes=(("a", 7000), ("b", 7001)),
                                 options={"username": "user", "password": "pw"})


@pytest.mark.parametrize("url, says", [
    ("redis+cluster://a:7000/3", "database 0 only"),
    ("redis+sentinel://a:1", "/MASTER_NAME"),
    ("redis+sentinel://a/m", "is not HOST:PORT"),
    ("redis+cluster://a:1?nope=1", "unknown parameters nope"),
])
def test_a_url_that_cannot_work_says_why(url, says):
    with pytest.raises(ImproperlyConfigured, match=says):
        parse_redis_url(url)


def test_the_structured_form():
    assert structured_target({"SENTINELS": [("a", 1)], "MASTER_NAME": "m", "DB": 1}) == \
        RedisTarget("sentinel", nodes=(("a", 1),), master="m", db=1)
    assert structured_target({"CLUSTER_NODES": [["a", "7000"]], "OPTIONS": {"password": "x"}}) == \
        RedisTarget("cluster", nodes=(("a", 7000),), options={"password": "x"})
    with pytest.raises(ImproperlyConfigured, match="either SENTINELS"):
        structured_target({"SENTINELS": [("a", 1)], "CLUSTER_NODES": [("b", 2)]})
    with pytest.raises(ImproperlyConfigured, match="MASTER_NAME"):
        structured_target({"SENTINELS": [("a", 1)]})


def test_the_settings_choose_and_a_cluster_tags_every_key():
    with override_settings(MCP_TRANSPORT={"REDIS": {"CLUSTER_NODES": [("a", 7000)]}, "KEY_PREFIX": "p"}):
        assert redis_target().kind == "cluster"
        names = keys()
        # One hash tag for every key and channel: one slot, so scripts and pipelines stay on one node.
        assert names.session("s") == "{p}:session:s" and names.control_channel() == "{p}:control"
    with override_settings(MCP_TRANSPORT={"REDIS_URL": "redis://h:1/0", "KEY_PREFIX": "p"}):
        assert redis_target().kind == "single" and keys().session("s") == "p:session:s"


def test_a_django_redis_sentinel_cache_is_followed():
    caches = {"default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": "redis://mymaster/2",
                          "OPTIONS": {"CLIENT_CLASS": "django_redis.client.SentinelClient",
                                      "SENTINELS": [("s1", 26379), ("s2", 26379)]}}}
    with override_settings(CACHES=caches, MCP_TRANSPORT={}):
        assert redis_target() == RedisTarget("sentinel", nodes=(("s1", 26379), ("s2", 26379)), master="mymaster",
                                             db=2)
