"""The Redis clients: one asyncio client (and connection pool) per event loop
(``async_redis()``), and one blocking one (``sync_redis()``), of any topology; and the readiness
probe's own small client per loop (``probe_redis()``), which rides out nothing."""
import asyncio
import functools
import weakref

import redis.asyncio as aredis
import redis.exceptions
from redis.asyncio.observability import recorder as redis_recorder

from ..conf import get_config
from .cluster import _cluster_class, riding_cluster_class
from .outages import _tolerance, connection_options, retry_policy
from .sentinel import SENTINEL_OPTIONS, _blocking_sentinel_pool, _failover_connection
from .targets import RedisTarget, redis_target

_async_clients = weakref.WeakKeyDictionary()
_probe_clients = weakref.WeakKeyDictionary()  # the loop -> ((seconds, target), its probe client)


def _sentinel_connection_class(target):
    return tuned(_failover_connection(bool(target.options.get("ssl"))))


def tuned(connection_class):
    """The connection class of the app's asyncio pools (the single server's, the Sentinel
    master's): packing in C, sending without a task. redis-py's asyncio Cluster client fixes
    its own class."""
    return writing_at_once(packing_in_c(connection_class))


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


@functools.cache
def writing_at_once(connection_class):
    """``connection_class`` sending a command without a task of its own when the socket takes it
    at once. redis-py bounds every send by ``socket_timeout`` with ``asyncio.wait_for``, which on
    Python 3.11 wraps the write in a new task: two more turns of the loop for each round trip,
    although a command below the transport's high-water mark never waits. Only a send that
    fills the buffer (the transport pauses) waits, and redis-py's own path bounds that wait."""

    class WritingAtOnce(connection_class):
        async def send_packed_command(self, command, check_health=True):
            if not self.socket_timeout or not self.is_connected or check_health and self.health_check_interval and \
                    asyncio.get_running_loop().time() > self.next_health_check:
                return await super().send_packed_command(command, check_health)
            if isinstance(command, str):
                command = command.encode()
            transport = self._writer.transport
            if transport.is_closing() or transport.get_write_buffer_size():
                return await super().send_packed_command(command, check_health)
            self._writer.writelines([command] if isinstance(command, bytes) else command)
            if transport.get_write_buffer_size() > transport.get_write_buffer_limits()[1]:
                await self._drain_within_timeout()

        async def _drain_within_timeout(self):
            try:
                await asyncio.wait_for(self._writer.drain(), self.socket_timeout)
            except asyncio.TimeoutError:
                await self.disconnect(nowait=True)
                raise redis.exceptions.TimeoutError("Timeout writing to socket") from None
            except OSError as exc:
                await self.disconnect(nowait=True)
                raise redis.exceptions.ConnectionError(f"Error while writing to socket: {exc}.") from exc
            except BaseException:  # cancelled half-way: the connection cannot be trusted (as redis-py)
                await self.disconnect(nowait=True)
                raise

    WritingAtOnce.__name__ = WritingAtOnce.__qualname__ = f"WritingAtOnce{connection_class.__name__}"
    return WritingAtOnce


class HandingOutAtOnce(aredis.BlockingConnectionPool):
    """redis-py's blocking pool, handing an idle connection out (and taking it back) at once
    while nothing else needs the pool's care.

    Its own ``get_connection`` takes the pool's condition, starts a timeout and records wait
    metrics; its ``release`` takes the condition and the pool's lock and dispatches an event:
    about 80 Python calls a command, a tenth of a 2025-11-25 echo call and more of a session's
    four round trips. None of it does anything while a connection is idle, no command waits for
    one, no maintenance runs, redis-py's own metrics are off and no re-authentication is due:
    then the connection is taken or given back as redis-py's code does it. Otherwise, and for
    every wait, redis-py's path runs as it is."""

    def _left_alone(self) -> bool:
        return not (self._in_maintenance or self._condition._waiters or _redis_metrics_on())

    async def get_connection(self, *args, **kwargs):
        if not (self._available_connections and self._left_alone()):
            return await super().get_connection(*args, **kwargs)
        connection = self._available_connections.pop()
        self._in_use_connections.add(connection)
        try:
            await self.ensure_connection(connection)
        except BaseException:
            await self.release(connection)
            raise
        return connection

    async def release(self, connection):
        if not self._left_alone() or connection.should_reconnect() or getattr(connection, "_re_auth_token", None):
            return await super().release(connection)
        self._in_use_connections.remove(connection)
        self._available_connections.append(connection)


def _redis_metrics_on() -> bool:
    """Whether redis-py records its own OpenTelemetry metrics (its pool's wait and count)."""
    return redis_recorder._get_or_create_collector() is not None


def _pool_wait() -> float:
    return max(20.0, _tolerance() * 2)


def _async_client(target: RedisTarget, max_connections: int, pool_wait: float = None, **overrides):
    """A client of ``target``; ``overrides``: keyword arguments that replace the app's own
    (``connection_options()``) and the target's, e.g. a probe's timeouts."""
    common = {"decode_responses": True, **connection_options(), **target.options, **overrides}
    pool_wait = _pool_wait() if pool_wait is None else pool_wait
    if target.kind == "cluster":
        from redis.asyncio.cluster import ClusterNode

        from redis.backoff import NoBackoff

        # A few immediate attempts each (a MOVED slot, a refreshed map); RidingCluster waits between.
        return _cluster_class()(startup_nodes=[ClusterNode(host, port) for host, port in target.nodes],
                                max_connections=max_connections,
                                **{**common, "retry": retry_policy(NoBackoff(), 2), **overrides})
    if target.kind == "sentinel":
        from redis.asyncio.sentinel import Sentinel

        sentinel = Sentinel(list(target.nodes), sentinel_kwargs={**SENTINEL_OPTIONS, **target.sentinel_options})
        return sentinel.master_for(target.master, db=target.db, max_connections=max_connections, timeout=pool_wait,
                                   connection_pool_class=_blocking_sentinel_pool(),
                                   connection_class=_sentinel_connection_class(target), **common)
    # A blocking pool: with a thousand streams appending at once, a command waits for a free
    # connection instead of failing with "Too many connections" (redis-py's default pool raises
    # at 100).
    # It waits for a free connection as long as a command rides out an outage: during a stall
    # every connection is busy waiting for its reply.
    pool = HandingOutAtOnce.from_url(target.url, max_connections=max_connections, timeout=pool_wait, **common)
    pool.connection_class = tuned(pool.connection_class)  # before its first connection
    return aredis.Redis(connection_pool=pool)


def async_redis():
    """The asyncio client of the running loop (clients cannot be shared across loops): a
    ``redis.asyncio.Redis``, or a ``RedisCluster`` on a Cluster (same commands)."""
    loop = asyncio.get_running_loop()
    client = _async_clients.get(loop)
    if client is None:
        client = _async_clients[loop] = _async_client(redis_target(), get_config()["REDIS_MAX_CONNECTIONS"])
    return client


def probe_redis(seconds: float):
    """The running loop's client for readiness probes (/readyz): every command tried once, on
    one of two connections, and every wait (a connection from the pool, a connect, a reply)
    given up after ``seconds``. The app's own clients wait out a stalled Redis for
    REDIS_OUTAGE_TOLERANCE; a probe must say at once that it does not answer."""
    from redis.backoff import NoBackoff

    loop, target = asyncio.get_running_loop(), redis_target()
    held = _probe_clients.get(loop)
    if held is None or held[0] != (seconds, target):
        client = _async_client(target, 2, pool_wait=seconds, retry=retry_policy(NoBackoff(), 0),
                               socket_timeout=seconds, socket_connect_timeout=seconds, health_check_interval=0)
        held = _probe_clients[loop] = ((seconds, target), client)
    return held[1]


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
