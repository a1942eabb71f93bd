"""A Django cache on a Redis Cluster, for the example project when ``REDIS_URL`` is
``redis+cluster://``: django-redis has no Cluster client (django-redis #208), and Django's own
RedisCache takes one server URL. This is Django's RedisCache with a redis-py ``RedisCluster``
behind it; the project uses its cache for small counters (OAuth registrations per address, the
example tools' counters), which need no more.
"""
from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from django_redis.pool import ConnectionFactory, SentinelConnectionFactory
from redis.cluster import ClusterNode

from redis.backoff import NoBackoff

from mcp_transport.connections import connection_options, parse_redis_url, retry_policy, riding_cluster_class


class ClusterCacheClient(RedisCacheClient):
    def __init__(self, servers, **options):
        super().__init__(servers, **options)
        self._cluster = None

    def get_client(self, key=None, *, write=False):
        if self._cluster is None:
            target = parse_redis_url(self._servers[0])
            # A count of attempts, as every Cluster client here: RedisCluster loops get_retries() times.
            options = {**connection_options(asynchronous=False), "retry": retry_policy(NoBackoff(), 2, asynchronous=False)}
            self._cluster = riding_cluster_class()(startup_nodes=[ClusterNode(host, port) for host, port in target.nodes],
                                         **options, **target.options)
        return self._cluster

    def get_many(self, keys):
        # MGET across slots is refused on a Cluster; redis-py splits this one by slot.
        values = self.get_client().mget_nonatomic(keys)
        return {key: self._serializer.loads(value) for key, value in zip(keys, values) if value is not None}

    def set_many(self, data, timeout):
        # A Cluster pipeline refuses MSET: one SET per key, still one round trip per node.
        pipeline = self.get_client(None, write=True).pipeline()
        for key, value in data.items():
            pipeline.set(key, self._serializer.dumps(value), ex=timeout)
        pipeline.execute()


class RedisClusterCache(RedisCache):
    """``CACHES = {"default": {"BACKEND": "mcpserver.cache.RedisClusterCache",
    "LOCATION": "redis+cluster://HOST:PORT,HOST:PORT"}}``."""

    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = ClusterCacheClient


class _RidingOut:
    """django-redis's connections with the app's own outage options (connections.py): a tool's
    cache write waits out a Redis stall, restart or failover as the app's commands do (it raised
    TimeoutError or ConnectionError into the tool: bench/chaos.py, tick_job_idempotent).
    CONNECTION_POOL_KWARGS of the cache still win."""

    def __init__(self, options):
        pool_kwargs = {**connection_options(asynchronous=False), **options.get("CONNECTION_POOL_KWARGS", {})}
        super().__init__({**options, "CONNECTION_POOL_KWARGS": pool_kwargs})


class RidingConnectionFactory(_RidingOut, ConnectionFactory):
    """``DJANGO_REDIS_CONNECTION_FACTORY`` of the example project on one Redis server."""


class RidingSentinelConnectionFactory(_RidingOut, SentinelConnectionFactory):
    """``DJANGO_REDIS_CONNECTION_FACTORY`` of the example project on a Sentinel set."""
