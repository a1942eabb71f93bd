"""Redis Cluster: redis-py's Cluster clients, asyncio and blocking, whose commands ride out a
failover (a dead master's replica waiting for its vote), and what redis-py fails with before a
command was sent."""
import asyncio
import functools
import time

from .outages import _tolerance


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
