"""Redis clients: one asyncio client (and connection pool) per event loop, and one blocking one.

Where Redis is: ``MCP_TRANSPORT["REDIS"]`` (structured), else ``MCP_TRANSPORT["REDIS_URL"]``,
else the django-redis cache named by ``CACHE_ALIAS`` (its LOCATION, or its Sentinel OPTIONS), so
a project configures Redis once, in CACHES. Three topologies (``RedisTarget.kind``):

- ``single``: ``redis://`` / ``rediss://`` / ``unix://``, one server (or a proxy in front of one);
- ``sentinel``: ``redis+sentinel://HOST:PORT,HOST:PORT/MASTER/DB``: the Sentinels tell which server
  is the master; after a failover redis-py asks them again (a write that reaches a demoted master
  gets READONLY, and the connection is dropped and re-resolved);
- ``cluster``: ``redis+cluster://HOST:PORT,HOST:PORT``: a Redis Cluster (database 0 only). Every key
  of one session carries the session's hash tag (``Keys``), so a session's scripts and pipelines
  stay on one node, and doorbells use sharded pub/sub (``state/bell.py``).

Retries, timeouts and reconnects belong to this layer (``connection_options()``): callers make one
round trip (a command, a pipeline or one EVALSHA) and see an error only once those are spent.

The package's modules: ``targets`` (where Redis is), ``outages`` (retries, timeouts, what an
error says), ``sentinel`` and ``cluster`` (each topology's failover), ``clients`` (building the
clients), ``keyspace`` (key and channel names), ``pubsub`` (publishing); ``broker`` (Celery's
broker transport on Redis, which ``apps.py`` selects; imported by its own name, as it imports
kombu). Other code imports from the package; what a module keeps (the clients, the cached
target) lives in that module only.
"""
from .clients import async_redis, packing_in_c, probe_redis, sync_client, sync_redis
from .cluster import _cluster_class, failed_before_sending, riding_cluster_class  # noqa: F401 (_cluster_class: tests)
from .keyspace import Keys, hash_tag, keys
from .outages import CONNECT_TIMEOUT, OUTAGE_ERRORS, connection_options, redis_failure, retry_policy
from .pubsub import publish
from .sentinel import SENTINEL_OPTIONS
from .targets import (CLUSTER_SCHEME, SENTINEL_SCHEME, RedisTarget, is_cluster, parse_redis_url, redis_target,
                      structured_target)

__all__ = [
    "CLUSTER_SCHEME", "CONNECT_TIMEOUT", "OUTAGE_ERRORS", "SENTINEL_OPTIONS", "SENTINEL_SCHEME", "Keys",
    "RedisTarget", "async_redis", "connection_options", "failed_before_sending", "hash_tag", "is_cluster",
    "keys", "packing_in_c", "parse_redis_url", "probe_redis", "publish", "redis_failure", "redis_target", "retry_policy",
    "riding_cluster_class", "structured_target", "sync_client", "sync_redis",
]
