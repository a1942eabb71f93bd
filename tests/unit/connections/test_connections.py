"""connections.connection_options(): the Redis clients ride out an outage of the tolerance, and
give up soon after it. A private redis-server, paused (SIGSTOP) or killed and started again."""
import os
import signal
import threading
import time

import pytest
import redis
import redis.asyncio as aredis
from django.test import override_settings

from mcp_transport.connections import connection_options
from mcpserver.embedded_redis import EmbeddedRedis


@pytest.fixture
def server():
    started = EmbeddedRedis().start()
    yield started
    if started.process is not None and started.process.poll() is None:
        os.kill(started.process.pid, signal.SIGCONT)
    started.stop()


def _client(server):
    return redis.Redis.from_url(server.url, decode_responses=True, **connection_options(asynchronous=False))


def _after(seconds, action):
    timer = threading.Timer(seconds, action)
    timer.start()
    return timer


@override_settings(MCP_TRANSPORT={"REDIS_OUTAGE_TOLERANCE": 10})
def test_a_command_sent_to_a_stalled_redis_is_answered_once_it_is_back_and_runs_once(server):
    client = _client(server)
    client.ping()  # connected before the stall
    os.kill(server.process.pid, signal.SIGSTOP)
    _after(6, lambda: os.kill(server.process.pid, signal.SIGCONT))  # past redis-py's default 5 s
    assert client.incr("counter") == 1  # waited through the stall, not timed out and sent again
    assert client.get("counter") == "1"


@override_settings(MCP_TRANSPORT={"REDIS_OUTAGE_TOLERANCE": 10})
def test_a_restarted_redis_is_found_again_by_a_pooled_connection(server):
    client = _client(server)
    client.set("before", "1")
    server.process.kill()
    server.process.wait()
    server.process = None
    _after(2, server.start)  # the same port, empty
    assert client.get("before") is None  # the stale connection failed, the retry reconnected
    assert client.set("after", "1")


@override_settings(MCP_TRANSPORT={"REDIS_OUTAGE_TOLERANCE": 2})
def test_an_outage_longer_than_the_tolerance_fails_soon_after_it(server):
    client = _client(server)
    client.ping()
    server.process.kill()
    server.process.wait()
    server.process = None
    began = time.monotonic()
    with pytest.raises(redis.ConnectionError):
        client.get("anything")
    assert 2 <= time.monotonic() - began < 2 + 3  # the tolerance, a back-off step and a connect


@override_settings(MCP_TRANSPORT={"REDIS_OUTAGE_TOLERANCE": 10})
async def test_the_asyncio_client_rides_out_a_stall_too(server):
    pool = aredis.ConnectionPool.from_url(server.url, decode_responses=True, **connection_options())
    client = aredis.Redis(connection_pool=pool)
    try:
        await client.ping()
        os.kill(server.process.pid, signal.SIGSTOP)
        _after(6, lambda: os.kill(server.process.pid, signal.SIGCONT))  # past redis-py's default 5 s
        assert await client.incr("counter") == 1
    finally:
        await client.aclose()


# -- a Cluster failover under load: redis-py's own AttributeError before the command was sent ---------

def _unsent_failure():
    """The error redis-py's asyncio connection raises when another task dropped its writer."""
    from redis.asyncio.connection import Connection

    sending = Connection()._send_packed_command([b"PING\r\n"])  # its writer is None
    try:
        sending.send(None)  # fails at its first line, before any await
    except AttributeError as exc:
        return exc
    raise AssertionError("redis-py wrote to a connection that has no writer")


def test_only_redis_py_s_own_failure_before_sending_counts_as_unsent():
    from mcp_transport.connections import failed_before_sending

    assert failed_before_sending(_unsent_failure())
    try:
        None.writelines  # noqa: B018 (the same error, raised by other code: not retried)
    except AttributeError as exc:
        assert not failed_before_sending(exc)
    assert not failed_before_sending(redis.ConnectionError("not an AttributeError"))


async def test_the_cluster_client_sends_a_command_again_after_redis_py_failed_before_sending_it(monkeypatch):
    """bench/chaos.py, a Cluster master killed under load: a tool's progress report failed with
    "'NoneType' object has no attribute 'writelines'" (the tool failed: "AttributeError")."""
    from redis.asyncio.cluster import RedisCluster

    from mcp_transport.connections import _cluster_class

    failure, attempts = _unsent_failure(), []

    async def flaky(self, *args, **kwargs):
        attempts.append(args)
        if len(attempts) == 1:
            raise failure
        return "PONG"

    monkeypatch.setattr(RedisCluster, "execute_command", flaky)
    cluster = object.__new__(_cluster_class())
    assert await cluster.execute_command("PING") == "PONG"
    assert attempts == [("PING",), ("PING",)]


@override_settings(MCP_TRANSPORT={"REDIS_OUTAGE_TOLERANCE": 10})
def test_the_example_project_s_cache_finds_a_restarted_redis_again(server):
    """A tool's own cache write (tick_job_idempotent's counter) raised ConnectionError into the
    tool when Redis restarted (bench/chaos.py): the cache's connections ride it out too."""
    from django_redis.cache import RedisCache

    cache = RedisCache(server.url, {"OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"}})
    cache.set("before", 1)
    server.process.kill()
    server.process.wait()
    server.process = None
    _after(2, server.start)  # the same port, empty
    cache.set("after", 2)  # the stale pooled connection failed, the retry reconnected
    assert cache.get("after") == 2 and cache.get("before") is None


def test_the_blocking_cluster_client_waits_out_a_failover(monkeypatch):
    """sync_redis() and the example project's cache on a Cluster: a command refused while a dead
    master's replica waits for its vote is sent again (a tool's counter write raised
    ConnectionError into the tool: bench/chaos.py, a Cluster master killed)."""
    from redis.cluster import RedisCluster

    from mcp_transport.connections import riding_cluster_class

    attempts = []

    def failing_over(self, *args, **kwargs):
        attempts.append(args)
        if len(attempts) < 3:
            raise redis.ConnectionError("Error 111 connecting to the dead master")
        return True

    monkeypatch.setattr(RedisCluster, "execute_command", failing_over)
    cluster = object.__new__(riding_cluster_class())
    assert cluster.execute_command("SET", "k", "v") is True
    assert len(attempts) == 3


@pytest.mark.parametrize("args", [
    ("EVALSHA", "a" * 40, 3, "k1", "k2", "k3", 1.5, 0.1, 7, 2 ** 70, b"raw", "ü", *["x" * 150] * 200),
    ("SET", "k", "v", "PX", 100),
    ("CONFIG GET", "maxmemory"),                   # a command name of two words
])
def test_commands_packed_in_c_are_the_bytes_redis_py_packs(args):
    from redis.asyncio.connection import Connection

    from mcp_transport.connections import packing_in_c

    assert packing_in_c(Connection) is not Connection  # hiredis is a requirement
    packed, reference = packing_in_c(Connection)(), Connection()
    assert b"".join(packed.pack_command(*args)) == b"".join(reference.pack_command(*args))


def test_what_redis_py_refuses_to_pack_is_refused_packed_in_c():
    from redis.asyncio.connection import Connection
    from redis.exceptions import DataError

    from mcp_transport.connections import packing_in_c

    with pytest.raises(DataError):
        packing_in_c(Connection)().pack_command("SET", "k", None)


async def test_the_async_client_packs_in_c():
    from mcp_transport.connections import async_redis

    assert isinstance(async_redis().connection_pool, aredis.BlockingConnectionPool)
    assert "PackingInC" in async_redis().connection_pool.connection_class.__name__


async def test_a_command_is_sent_without_a_task_of_its_own(server):
    """redis-py bounds a send with asyncio.wait_for, a task per command on Python 3.11; a
    command the socket takes at once needs none (connections/clients.py ``writing_at_once``)."""
    import asyncio

    from mcp_transport.connections import parse_redis_url
    from mcp_transport.connections.clients import _async_client

    client = _async_client(parse_redis_url(server.url), 2)
    await client.ping()  # connected: the first command's connect may use tasks of its own
    loop, made = asyncio.get_running_loop(), []
    default_factory = loop.get_task_factory()

    def counting(loop, coro, **kwargs):
        made.append(coro)
        return asyncio.Task(coro, loop=loop, **kwargs) if default_factory is None else default_factory(loop, coro)

    loop.set_task_factory(counting)
    try:
        assert await client.set("k", "v") and await client.get("k") == "v"
    finally:
        loop.set_task_factory(default_factory)
    assert made == []
    big = "x" * (4 << 20)  # past the transport's high-water mark: the send waits, within the timeout
    assert await client.set("big", big) and len(await client.get("big")) == len(big)
    await client.aclose()


async def test_an_idle_connection_is_handed_out_and_taken_back_without_the_pools_wait(server, monkeypatch):
    """connections/clients.py ``HandingOutAtOnce``: redis-py's condition, timeout and event
    only when something needs them."""
    from mcp_transport.connections import parse_redis_url
    from mcp_transport.connections.clients import _async_client

    client = _async_client(parse_redis_url(server.url), 2)
    await client.ping()
    waited = []
    base = aredis.BlockingConnectionPool
    for name in ("get_connection", "release"):
        original = getattr(base, name)

        async def counted(self, *args, _original=original, _name=name, **kwargs):
            waited.append(_name)
            return await _original(self, *args, **kwargs)

        monkeypatch.setattr(base, name, counted)
    for n in range(5):
        assert await client.set(f"k{n}", n)
    assert waited == []
    await client.aclose()


async def test_a_command_waiting_for_a_connection_gets_it_when_one_is_given_back(server):
    """Past the pool's size a command waits (redis-py's path) and is served in turn: a busy
    pool's fast path does not take the connection it waits for."""
    import asyncio

    from mcp_transport.connections import parse_redis_url
    from mcp_transport.connections.clients import _async_client

    client = _async_client(parse_redis_url(server.url), 1)
    await client.ping()
    pool = client.connection_pool
    held = await pool.get_connection()  # the pool's one connection, taken
    waiting = asyncio.create_task(client.set("waited", "yes"))
    while not pool._condition._waiters:
        await asyncio.sleep(0.01)
    await pool.release(held)
    assert await waiting and await client.get("waited") == "yes"
    await client.aclose()
