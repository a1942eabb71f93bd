"""Doorbells and the control channel hear again after Redis comes back: a restarted plain Redis,
a Sentinel failover, a Cluster failover. The issue saw "doorbell resubscribe failed" and
``PUBSUB NUMSUB mcp:control`` = 0 after a Redis restart, so cross-process cancel and DELETE were
ignored until the process restarted."""
import asyncio
import time

import pytest
from django.conf import settings
from django.test import override_settings

from mcp_transport.connections import keys, publish, sync_client, redis_target
from mcp_transport.state import control
from mcp_transport.state.bell import doorbell
from mcpserver.embedded_redis import EmbeddedRedis
from mcpserver.redis_topologies import key_slot


async def until(condition, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(condition):
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.1)


def subscribers(channel) -> int:
    """PUBSUB NUMSUB (SHARDNUMSUB on a Cluster) of the channel, on the server that has it now."""
    try:
        client = sync_client(redis_target(), socket_timeout=1, socket_connect_timeout=1)
        try:
            if redis_target().kind == "cluster":  # a shard's replicas may hold sharded subscribers too
                return sum(dict(node.redis_connection.execute_command("PUBSUB SHARDNUMSUB", channel)).get(channel, 0)
                           for node in client.get_nodes())
            return dict(client.pubsub_numsub(channel)).get(channel, 0)
        finally:
            client.close()
    except Exception:
        return 0


async def next_message(subscription, timeout=30.0):
    """The next published message, past the wake-ups (None, None) of a re-subscription."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        received = await subscription.wait(max(0.1, deadline - time.monotonic()))
        if received is not None and received[0] is not None:
            return received
    return None


async def assert_hears_again(subscription, channel, fault):
    from mcp_transport.connections import async_redis

    await fault()
    await until(lambda: subscribers(channel) == 1)
    woken = await subscription.wait(30)
    assert woken == (None, None)  # what was published meanwhile is gone: listeners look again
    await publish(async_redis(), channel, "after")
    assert await next_message(subscription) == (channel, "after")


@pytest.fixture
def plain_redis():
    server = EmbeddedRedis().start()
    with override_settings(MCP_TRANSPORT={**settings.MCP_TRANSPORT, "REDIS_URL": server.url}):
        yield server
    server.stop()


async def test_a_restarted_redis_is_subscribed_again(plain_redis):
    channel = keys().control_channel()
    async with doorbell().listen(channel) as subscription:
        assert subscribers(channel) == 1

        async def restart():
            port = plain_redis.port
            plain_redis.stop()
            await asyncio.sleep(1)  # down for a while: every reconnect attempt of redis-py fails
            plain_redis.port = port
            await asyncio.to_thread(plain_redis.start)

        await assert_hears_again(subscription, channel, restart)


async def test_the_control_channel_acts_after_a_restart(plain_redis):
    """The process's control listener (cancel, takeover, closed) works again."""
    await control.ensure_listening()
    seen = []
    control.on_message("test_probe", seen.append)
    port = plain_redis.port
    plain_redis.stop()
    await asyncio.sleep(1)
    plain_redis.port = port
    await asyncio.to_thread(plain_redis.start)
    await until(lambda: subscribers(keys().control_channel()) == 1)
    for _ in range(100):
        await control.publish("test_probe", "s1")
        await asyncio.sleep(0.1)
        if seen:
            break
    assert seen and seen[0] == "s1"


@pytest.fixture
def sentinel_redis(sentinel_set):
    with override_settings(MCP_TRANSPORT={**settings.MCP_TRANSPORT, "REDIS_URL": sentinel_set.url}):
        yield sentinel_set


async def test_a_sentinel_failover_is_subscribed_again(sentinel_redis):
    channel = keys().stream_bell("s", "k")
    async with doorbell().listen(channel) as subscription:
        async def failover():
            old, _new = await asyncio.to_thread(sentinel_redis.kill_master)
            await asyncio.to_thread(sentinel_redis.restart, old)

        await assert_hears_again(subscription, channel, failover)


@pytest.fixture
def cluster_redis(redis_cluster):
    with override_settings(MCP_TRANSPORT={**settings.MCP_TRANSPORT, "REDIS_URL": redis_cluster.url}):
        yield redis_cluster


async def test_a_cluster_failover_is_subscribed_again(cluster_redis):
    channel = keys().stream_bell("s", "k")
    assert channel.startswith("{")  # the app's hash tag: one slot for all
    async with doorbell().listen(channel) as subscription:
        assert subscribers(channel) == 1  # sharded: SSUBSCRIBE on the slot's master

        async def failover():
            old, _new = await asyncio.to_thread(cluster_redis.kill_master, key_slot(channel))
            await asyncio.to_thread(cluster_redis.restart, old)

        await assert_hears_again(subscription, channel, failover)
