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
