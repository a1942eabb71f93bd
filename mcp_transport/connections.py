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
"""
import asyncio
import functools
import hashlib
import time
import weakref
from typing import NamedTuple
from urllib.parse import parse_qsl, unquote

import redis
import redis.asyncio as aredis
import redis.asyncio.retry
import redis.retry
from redis.backoff import ExponentialBackoff
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver

from .conf import get_config, redis_url

_async_clients = weakref.WeakKeyDictionary()

#: Errors a stall, a restart or a failover of Redis gives, after which the same command is sent
#: again on a new connection (redis-py's ``retry_on_error``). A reply of Redis (ResponseError,
#: MOVED ...) is an answer, not an outage: it is never retried here.
OUTAGE_ERRORS = (redis.ConnectionError, redis.TimeoutError)
#: Seconds a new connection may take to be accepted: a refused or black-holed connect is retried.
CONNECT_TIMEOUT = 2.0


class _AsyncRetryWithin(redis.asyncio.retry.Retry):
    """redis-py's retry with a bound in time rather than in attempts: a refused connection fails
    at once and a stalled one only after its socket timeout, so no count of attempts spans the
    same outage in both cases."""

    def __init__(self, seconds: float):
        super().__init__(ExponentialBackoff(cap=1.0, base=0.05), retries=-1, supported_errors=OUTAGE_ERRORS)
        self.seconds = seconds

    async def call_with_retry(self, do, fail, is_retryable=None, with_failure_count=False):
        return await super().call_with_retry(do, fail, _within(self.seconds, is_retryable), with_failure_count)


class _SyncRetryWithin(redis.retry.Retry):
    """The blocking client's ``_AsyncRetryWithin``."""

    def __init__(self, seconds: float):
        super().__init__(ExponentialBackoff(cap=1.0, base=0.05), retries=-1, supported_errors=OUTAGE_ERRORS)
        self.seconds = seconds

    def call_with_retry(self, do, fail, is_retryable=None, with_failure_count=False):
        return super().call_with_retry(do, fail, _within(self.seconds, is_retryable), with_failure_count)


def _within(seconds, is_retryable):
    deadline = time.monotonic() + seconds

    def retryable(error):
        return time.monotonic() < deadline and (is_retryable is None or is_retryable(error))

    return retryable


def redis_failure(error: Exception) -> str:
    """What a Redis error says happened, for a log line: "unreachable" only for an outage that
    outlasted REDIS_OUTAGE_TOLERANCE; a reply (MOVED from a Cluster, a script error, OOM ...) is
    Redis refusing a command, which no waiting fixes."""
    tolerance = get_config()["REDIS_OUTAGE_TOLERANCE"]
    exceptions = redis.exceptions
    # A Cluster's replies say the configuration is wrong or a failover is under way: no outage.
    if isinstance(error, (exceptions.MovedError, exceptions.AskError)):
        return ("Redis answered MOVED: the Redis URL names one node of a Redis Cluster "
                "(name the Cluster: redis+cluster://HOST:PORT,...)")
    if "CROSSSLOT" in str(error) or isinstance(error, exceptions.RedisClusterException):
        return "Redis Cluster refused a command whose keys span several slots"
    if isinstance(error, exceptions.ReadOnlyError):
        return "Redis is a read-only replica (a failover under way, or the Redis URL names a replica)"
    if isinstance(error, exceptions.ClusterDownError):
        return "the Redis Cluster is down (a failover under way?)"
    if isinstance(error, redis.TimeoutError):
        return f"Redis did not answer within REDIS_OUTAGE_TOLERANCE ({tolerance:g} s)"
    if isinstance(error, redis.ConnectionError):
        return f"Redis is unreachable (for longer than REDIS_OUTAGE_TOLERANCE, {tolerance:g} s)"
    if isinstance(error, redis.ResponseError):
        return f"Redis refused a command ({type(error).__name__}: {error})"
    return f"Redis failed ({type(error).__name__}: {error})"


def connection_options(asynchronous: bool = True) -> dict:
    """How every Redis client of the app rides out an outage (a stall, a restart, a failover)
    of up to REDIS_OUTAGE_TOLERANCE seconds, so that its callers stay plain: keyword arguments
    for redis-py's clients and pools (any factory: URL, Sentinel, Cluster).

    - A command (or a pipeline, or a script: one round trip) whose connection fails is sent
      again on a new connection, with back-off, until the tolerance is spent.
    - A reply is awaited for the whole tolerance: a stalled Redis that comes back answers the
      command it has; timing out and re-sending it would run it twice (an event appended twice).
    - A connect gives up after CONNECT_TIMEOUT and is retried: a restarted Redis is found soon.
    - A pooled connection idle for a while is checked (PING) before use, and a broken one is
      replaced by the retry: connections left over from before a restart are dropped.
    """
    tolerance = float(get_config()["REDIS_OUTAGE_TOLERANCE"])
    retry = (_AsyncRetryWithin if asynchronous else _SyncRetryWithin)(tolerance)
    return {"retry": retry, "retry_on_error": list(OUTAGE_ERRORS), "socket_timeout": tolerance + 1,
            "socket_connect_timeout": min(CONNECT_TIMEOUT, tolerance), "health_check_interval": 30,
            "socket_keepalive": True}


SENTINEL_SCHEME, CLUSTER_SCHEME = "redis+sentinel", "redis+cluster"


class RedisTarget(NamedTuple):
    """Where Redis is: ``kind`` (single, sentinel, cluster), the URL of a single server, the
    (host, port) of the Sentinels or of the Cluster's seed nodes, the Sentinel master's name,
    the database, and client keyword arguments (username, password, ssl ...)."""

    kind: str
    url: str = ""
    nodes: tuple = ()
    master: str = ""
    db: int = 0
    options: dict = {}
    sentinel_options: dict = {}


def parse_redis_url(url: str) -> RedisTarget:
    """``redis://``, ``rediss://``, ``unix://`` (one server), ``redis+sentinel://[user:pass@]H:P,H:P/
    MASTER[/DB][?sentinel_password=...]`` or ``redis+cluster://[user:pass@]H:P,H:P[/0]``."""
    scheme, sep, rest = url.partition("://")
    if scheme not in (SENTINEL_SCHEME, CLUSTER_SCHEME):
        return RedisTarget("single", url=url)
    if not sep:
        raise ImproperlyConfigured(f"Redis URL {url!r} has no '://'.")
    rest, _, query = rest.partition("?")
    netloc, _, path = rest.partition("/")
    credentials, _, hosts = netloc.rpartition("@")
    options = _credentials(credentials)
    params = dict(parse_qsl(query))
    sentinel_options = {}
    if "sentinel_password" in params:
        sentinel_options["password"] = params.pop("sentinel_password")
    if params.pop("ssl", "") in ("1", "true", "yes"):
        options["ssl"] = True
    if params:
        raise ImproperlyConfigured(f"Redis URL {url!r}: unknown parameters {', '.join(sorted(params))}.")
    nodes = tuple(_host_port(node, url) for node in hosts.split(",") if node)
    if not nodes:
        raise ImproperlyConfigured(f"Redis URL {url!r} names no host.")
    parts = [part for part in path.split("/") if part]
    if scheme == CLUSTER_SCHEME:
        if parts not in ([], ["0"]):
            raise ImproperlyConfigured(f"Redis URL {url!r}: a Redis Cluster has database 0 only.")
        return RedisTarget("cluster", nodes=nodes, options=options)
    if not parts or len(parts) > 2 or (len(parts) == 2 and not parts[1].isdigit()):
        raise ImproperlyConfigured(f"Redis URL {url!r}: a Sentinel URL ends with /MASTER_NAME or /MASTER_NAME/DB.")
    return RedisTarget("sentinel", nodes=nodes, master=unquote(parts[0]), db=int(parts[1]) if len(parts) == 2 else 0,
                       options=options, sentinel_options=sentinel_options)


def _credentials(credentials):
    if not credentials:
        return {}
    username, colon, password = credentials.partition(":")
    if not colon:  # redis://secret@host: a password alone, as redis-py reads it
        return {"password": unquote(username)}
    return {key: unquote(value) for key, value in (("username", username), ("password", password)) if value}


def _host_port(node, url):
    host, _, port = node.strip().rpartition(":")
    if not host or not port.isdigit():
        raise ImproperlyConfigured(f"Redis URL {url!r}: {node!r} is not HOST:PORT.")
    return host.strip("[]"), int(port)


def structured_target(spec: dict) -> RedisTarget:
    """``MCP_TRANSPORT["REDIS"]``: ``{"SENTINELS": [(host, port), ...], "MASTER_NAME": ..., "DB": 0}``
    or ``{"CLUSTER_NODES": [(host, port), ...]}``, with ``OPTIONS`` (client keyword arguments:
    username, password, ssl ...) and ``SENTINEL_OPTIONS`` (the Sentinels' own, e.g. password)."""
    unknown = set(spec) - {"SENTINELS", "MASTER_NAME", "DB", "CLUSTER_NODES", "OPTIONS", "SENTINEL_OPTIONS"}
    if unknown:
        raise ImproperlyConfigured(f"Unknown MCP_TRANSPORT['REDIS'] keys: {', '.join(sorted(unknown))}.")
    options = dict(spec.get("OPTIONS") or {})
    if bool(spec.get("SENTINELS")) == bool(spec.get("CLUSTER_NODES")):
        raise ImproperlyConfigured("MCP_TRANSPORT['REDIS'] names either SENTINELS (with MASTER_NAME) or CLUSTER_NODES.")
    if spec.get("CLUSTER_NODES"):
        return RedisTarget("cluster", nodes=tuple((h, int(p)) for h, p in spec["CLUSTER_NODES"]), options=options)
    if not spec.get("MASTER_NAME"):
        raise ImproperlyConfigured("MCP_TRANSPORT['REDIS'] with SENTINELS needs MASTER_NAME.")
    return RedisTarget("sentinel", nodes=tuple((h, int(p)) for h, p in spec["SENTINELS"]), master=spec["MASTER_NAME"],
                       db=int(spec.get("DB", 0)), options=options,
                       sentinel_options=dict(spec.get("SENTINEL_OPTIONS") or {}))


@functools.cache
def redis_target() -> RedisTarget:
    """Where this app's Redis is (see the module's docstring for the order of the settings).
    Read once: ``keys()`` asks on every call whether this is a Cluster."""
    config = get_config()
    if config.get("REDIS"):
        return structured_target(config["REDIS"])
    if not config["REDIS_URL"]:
        cache = settings.CACHES.get(config["CACHE_ALIAS"], {})
        sentinels = (cache.get("OPTIONS") or {}).get("SENTINELS")
        if sentinels:  # django-redis's Sentinel client: LOCATION is redis://MASTER_NAME/DB
            master, _, db = redis_url().partition("://")[2].partition("/")
            return RedisTarget("sentinel", nodes=tuple((h, int(p)) for h, p in sentinels), master=master,
                               db=int(db or 0), sentinel_options=dict(cache["OPTIONS"].get("SENTINEL_KWARGS") or {}))
    return parse_redis_url(redis_url())


@receiver(setting_changed)
def _forget_target(*, setting, **kwargs):
    if setting in ("MCP_TRANSPORT", "CACHES"):
        redis_target.cache_clear()


def _tolerance() -> float:
    """REDIS_OUTAGE_TOLERANCE: how long a command rides out a stall or failover (a Sentinel
    promotes a replica in about 3 s, a Cluster in about its cluster-node-timeout and a vote)."""
    return float(get_config()["REDIS_OUTAGE_TOLERANCE"])


def retry_policy(backoff, retries: int, asynchronous: bool = True):
    """A redis-py Retry for an asyncio client, or for a blocking one."""
    if asynchronous:
        from redis.asyncio.retry import Retry
    else:
        from redis.retry import Retry
    return Retry(backoff, retries)


#: Where redis-py's asyncio Cluster client, while a failover replaces a node, fails a command
#: with an AttributeError of its own before anything was written: a pooled connection whose
#: writer another task dropped that instant ("'NoneType' object has no attribute 'writelines'",
#: seen under load by bench/chaos.py; a tool's progress report failed with it), or a slot table
#: between two states (redis-py #3835). The command never left: sending it again cannot run it twice.
_UNSENT_FAILURE_FRAMES = frozenset({"_send_packed_command", "send_packed_command", "_determine_nodes",
                                    "get_node_from_slot"})


def failed_before_sending(exc: BaseException) -> bool:
    """True for redis-py's own AttributeError raised before the command was written."""
    if not isinstance(exc, AttributeError) or exc.__traceback__ is None:
        return False
    innermost = exc.__traceback__
    while innermost.tb_next is not None:
        innermost = innermost.tb_next
    frame = innermost.tb_frame
    return frame.f_code.co_name in _UNSENT_FAILURE_FRAMES and frame.f_globals.get("__name__", "").startswith("redis.")


@functools.cache
def _cluster_class():
    """redis-py's asyncio RedisCluster, whose commands ride out a failover. Its own retries
    follow each other at once (no back-off), so they are spent in milliseconds while a dead
    master's replica waits for its vote: here a command is tried again, with back-off, for
    _tolerance(). Pipelines are not (a failed one has forgotten its commands); their callers
    are the housekeeping rounds, which run again anyway."""
    from redis.asyncio.cluster import RedisCluster

    class RidingCluster(RedisCluster):
        async def execute_command(self, *args, **kwargs):
            for delay in _failover_delays():
                try:
                    return await super().execute_command(*args, **kwargs)
                except Exception as exc:
                    if not _worth_sending_again(self, exc):
                        raise
                await asyncio.sleep(delay)
            return await super().execute_command(*args, **kwargs)

    return RidingCluster


@functools.cache
def riding_cluster_class():
    """redis-py's blocking RedisCluster, riding out a failover as ``_cluster_class()``'s: for
    ``sync_redis()`` and the example project's cache (a tool's counter write raised
    ConnectionError into the tool when a Cluster master died: bench/chaos.py)."""
    from redis.cluster import RedisCluster

    class RidingBlockingCluster(RedisCluster):
        def execute_command(self, *args, **kwargs):
            for delay in _failover_delays():
                try:
                    return super().execute_command(*args, **kwargs)
                except Exception as exc:
                    if not _worth_sending_again(self, exc):
                        raise
                time.sleep(delay)
            return super().execute_command(*args, **kwargs)

    return RidingBlockingCluster


def _failover_delays():
    """Back-off delays (0.05 s doubling up to 1 s) between attempts, while REDIS_OUTAGE_TOLERANCE lasts."""
    deadline, delay = time.monotonic() + _tolerance(), 0.05
    while time.monotonic() + delay <= deadline:
        yield delay
        delay = min(delay * 2, 1.0)


def _worth_sending_again(cluster, exc: Exception) -> bool:
    return isinstance(exc, cluster.ERRORS_ALLOW_RETRY) or failed_before_sending(exc)


@functools.cache
def _failover_connection(ssl: bool):
    """redis-py's asyncio Sentinel connection, which asks the Sentinels again on every reconnect.
    redis-py's own reconnects, inside a command's retries, go back to the address the connection
    had (send_packed_command connects by host and port): a command in flight when the master died
    retried the dead address until its retries ran out, though a replica had taken over in 3 s."""
    from redis.asyncio.sentinel import SentinelManagedConnection, SentinelManagedSSLConnection

    class FailoverConnection(SentinelManagedSSLConnection if ssl else SentinelManagedConnection):
        async def send_packed_command(self, command, check_health=True):
            if not self.is_connected:
                await self.connect()  # the Sentinels name the master
            return await super().send_packed_command(command, check_health)

    return FailoverConnection


@functools.cache
def _blocking_sentinel_pool():
    """redis-py's Sentinel pool, blocking as the single server's is (a command waits for a free
    connection instead of failing with "Too many connections")."""
    from redis.asyncio.sentinel import SentinelConnectionPool

    class BlockingSentinelPool(SentinelConnectionPool, aredis.BlockingConnectionPool):
        pass

    return BlockingSentinelPool


def _sentinel_connection_class(target):
    return packing_in_c(_failover_connection(bool(target.options.get("ssl"))))


@functools.cache
def packing_in_c(connection_class):
    """``connection_class`` packing commands with hiredis, as redis-py's blocking connections do
    when hiredis is installed; its asyncio connections pack in Python, growing one buffer an
    argument at a time: 250 µs for the 200 arguments of an event batch's EVALSHA, 69 µs with
    hiredis (bench/RESULTS.md, 1,000 streams). Unchanged without hiredis. For the single server's
    and the Sentinel master's pools; redis-py's asyncio Cluster client fixes its own class."""
    from redis.connection import HiredisRespSerializer
    from redis.utils import HIREDIS_AVAILABLE

    if not HIREDIS_AVAILABLE:
        return connection_class
    packer = HiredisRespSerializer()

    class PackingInC(connection_class):
        def pack_command(self, *args):
            # hiredis encodes str as UTF-8, and int and float as the Python packer does.
            if self.encoder.encoding.lower().replace("-", "") != "utf8" or self.encoder.encoding_errors != "strict":
                return super().pack_command(*args)
            return packer.pack(*args)

    PackingInC.__name__ = PackingInC.__qualname__ = f"PackingInC{connection_class.__name__}"
    return PackingInC


#: The Sentinels' own connections: a dead Sentinel is skipped at once, the next one asked.
SENTINEL_OPTIONS = {"socket_timeout": 1.0, "socket_connect_timeout": 1.0}


def _pool_wait() -> float:
    return max(20.0, _tolerance() * 2)


def is_cluster() -> bool:
    return redis_target().kind == "cluster"


def _async_client(target: RedisTarget, max_connections: int):
    common = {"decode_responses": True, **connection_options(), **target.options}
    if target.kind == "cluster":
        from redis.asyncio.cluster import ClusterNode

        from redis.backoff import NoBackoff

        # A few immediate attempts each (a MOVED slot, a refreshed map); RidingCluster waits between.
        return _cluster_class()(startup_nodes=[ClusterNode(host, port) for host, port in target.nodes],
                                max_connections=max_connections, **{**common, "retry": retry_policy(NoBackoff(), 2)})
    if target.kind == "sentinel":
        from redis.asyncio.sentinel import Sentinel

        sentinel = Sentinel(list(target.nodes), sentinel_kwargs={**SENTINEL_OPTIONS, **target.sentinel_options})
        return sentinel.master_for(target.master, db=target.db, max_connections=max_connections, timeout=_pool_wait(),
                                   connection_pool_class=_blocking_sentinel_pool(),
                                   connection_class=_sentinel_connection_class(target), **common)
    # A blocking pool: with a thousand streams appending at once, a command waits for a free
    # connection instead of failing with "Too many connections" (redis-py's default pool raises
    # at 100).
    # It waits for a free connection as long as a command rides out an outage: during a stall
    # every connection is busy waiting for its reply.
    pool = aredis.BlockingConnectionPool.from_url(target.url, max_connections=max_connections,
                                                  timeout=_pool_wait(), **common)
    pool.connection_class = packing_in_c(pool.connection_class)  # before its first connection
    return aredis.Redis(connection_pool=pool)


def async_redis():
    """The asyncio client of the running loop (clients cannot be shared across loops): a
    ``redis.asyncio.Redis``, or a ``RedisCluster`` on a Cluster (same commands)."""
    loop = asyncio.get_running_loop()
    client = _async_clients.get(loop)
    if client is None:
        client = _async_clients[loop] = _async_client(redis_target(), get_config()["REDIS_MAX_CONNECTIONS"])
    return client


_sync_client = None


def sync_redis():
    """A blocking client for code outside the event loop (admin actions, commands, signals)."""
    global _sync_client
    if _sync_client is None:
        _sync_client = sync_client(redis_target())
    return _sync_client


def sync_client(target: RedisTarget, **extra):
    """A new blocking client of ``target`` (``extra``: more keyword arguments, e.g. timeouts)."""
    import redis

    common = {"decode_responses": True, **connection_options(asynchronous=False), **target.options, **extra}
    if target.kind == "cluster":
        from redis.cluster import ClusterNode

        from redis.backoff import NoBackoff

        # As the asyncio Cluster client: a few immediate attempts (a moved slot, a refreshed map);
        # a Retry bound in time rather than attempts breaks the blocking client's COMMAND lookup.
        return riding_cluster_class()(startup_nodes=[ClusterNode(host, port) for host, port in target.nodes],
                            **{**common, "retry": retry_policy(NoBackoff(), 2, asynchronous=False)})
    if target.kind == "sentinel":
        from redis.sentinel import Sentinel

        sentinel = Sentinel(list(target.nodes), sentinel_kwargs={**SENTINEL_OPTIONS, **target.sentinel_options})
        return sentinel.master_for(target.master, db=target.db, **common)
    return redis.Redis.from_url(target.url, **common)


def hash_tag(value: str) -> str:
    """``{value}``: on a Cluster only the part in braces decides a key's slot, so every key that
    carries the same tag lives on the same node (what one script or MULTI may touch)."""
    return "{" + value + "}"


class Keys:
    """Every Redis key and channel name, built in one place: ``{prefix}:{kind}:{session}[:...]``."""

    def __init__(self, prefix: str):
        self.prefix = prefix

    def session(self, session_id):
        return f"{self.prefix}:session:{session_id}"

    def stream(self, session_id, stream_key):
        return f"{self.prefix}:stream:{session_id}:{stream_key}"

    def stream_bell(self, session_id, stream_key):
        return f"{self.prefix}:bell:{session_id}:{stream_key}"

    def reader(self, session_id, stream_key):
        """Token of the connection that currently reads a stream (one per stream, any process)."""
        return f"{self.prefix}:reader:{session_id}:{stream_key}"

    def call(self, session_id, stream_key):
        """The request behind a POST stream: its id and its process's last heartbeat."""
        return f"{self.prefix}:call:{session_id}:{stream_key}"

    def opened_streams(self, session_id):
        """The streams of a session served over stdio or HTTP+SSE, in the order they were
        opened (eras/legacy_2025/session.py)."""
        return f"{self.prefix}:opened:{session_id}"

    def closed(self, session_id):
        """Set when the session closes: its late events are not stored (storage/redis.py)."""
        return f"{self.prefix}:closed:{session_id}"

    def outbound_ids(self, session_id):
        return f"{self.prefix}:outid:{session_id}"

    def reply(self, session_id, request_id):
        return f"{self.prefix}:reply:{session_id}:{request_id}"

    def parked(self, session_id, request_id):
        """The background job that gave its worker back until this request of ours is answered."""
        return f"{self.prefix}:parked:{session_id}:{request_id}"

    def job_answers(self, job_id):
        """The client's answers a parked job has had so far: a hash of the question's index in
        the call (the tool's ask count) -> ``{"result"}`` or ``{"error"}``."""
        return f"{self.prefix}:jobreplies:{job_id}"

    def job_asked(self, job_id):
        """The questions a parked job has sent: index -> ``{"id": request id, "digest", "until"}``
        (and ``"key"``, its inputRequests key, for a 2026-07-28 job)."""
        return f"{self.prefix}:jobasked:{job_id}"

    def held_waits(self, worker):
        """The jobs of one Celery worker waiting for a client in their slot: job id -> deadline."""
        return f"{self.prefix}:heldwaits:{worker}"

    def waiting_sweep(self):
        """Where the cleanup's sweep of waiting jobs stopped: "<updated_at> <job id>" (jobs.py)."""
        return f"{self.prefix}:sweep:waiting"

    def listen_bell(self):
        """Every list_changed / resources/updated, for the 2026-07-28 subscriptions/listen streams."""
        return f"{self.prefix}:listen"

    def control_channel(self):
        return f"{self.prefix}:control"

    def metrics(self):
        return f"{self.prefix}:metrics"

    def open_streams(self, process_id):
        return f"{self.prefix}:openstreams:{process_id}"

    def session_counters(self, session_id):
        """A session's own counters (resumes, replays): metrics.py."""
        return f"{self.prefix}:sesscount:{session_id}"

    def samples(self):
        """The dashboard's samples of the counters over time, newest first: samples.py."""
        return f"{self.prefix}:samples"

    def sample_lock(self):
        return f"{self.prefix}:samples:lock"

    def address_sessions(self, address):
        """Sorted set of the ids of sessions opened from one client address (quotas.py)."""
        return f"{self.prefix}:addrsess:{address}"

    def replayed(self, caller):
        """Bytes replayed to a caller (``caller:<digest>``) in the current window (quotas.py)."""
        return f"{self.prefix}:replayed:{caller}"

    def calls(self, session_id):
        """Sorted set of the requests and background jobs of a session (or of a 2026-07-28 caller,
        ``caller:<digest>``) running now, scored by when they expire (quotas.py)."""
        return f"{self.prefix}:calls:{session_id}"

    def job_slot(self, job_id):
        """The running-calls set (``calls``) a background job counts in, until it ends (quotas.py)."""
        return f"{self.prefix}:jobslot:{job_id}"

    def subscriptions(self, session_id):
        """The resource URIs a session subscribed to."""
        return f"{self.prefix}:subs:{session_id}"

    def auth_token(self, digest):
        """A token's cached validation result (auth/), by the token's SHA-256."""
        return f"{self.prefix}:auth:{digest}"

    def uri_subscribers(self, uri):
        """The sessions subscribed to a resource URI (hashed: URIs are long and arbitrary)."""
        return f"{self.prefix}:urisubs:{hashlib.sha256(uri.encode()).hexdigest()[:32]}"


def keys() -> Keys:
    """The key names. On a Cluster the prefix is a hash tag (``{mcp}``): every key and channel of
    the app then lives in one slot, so every script (the event store's append touches the
    session's streams and the store's shared bookkeeping) and pipeline stays on one node, and a
    failover moves them all at once. TODO: per-session tags spread sessions over the Cluster's
    masters once the store keeps its bookkeeping per slot (docs/deployment.md)."""
    prefix = get_config()["KEY_PREFIX"]
    return Keys(hash_tag(prefix) if is_cluster() else prefix)


def publish(client, channel: str, message) -> None:
    """PUBLISH on a client or pipeline, SPUBLISH on a Cluster: a sharded channel's message goes
    to the nodes of its slot only, where a plain one crosses the whole Cluster bus
    (``state/bell.py`` subscribes with SSUBSCRIBE there). Returns what the call returns."""
    return (client.spublish if is_cluster() else client.publish)(channel, message)


