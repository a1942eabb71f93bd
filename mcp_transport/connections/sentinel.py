"""Redis Sentinel: the master's connections, which ask the Sentinels again on every reconnect,
and its blocking pool."""
import functools

import redis.asyncio as aredis


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


#: The Sentinels' own connections: a dead Sentinel is skipped at once, the next one asked.
SENTINEL_OPTIONS = {"socket_timeout": 1.0, "socket_connect_timeout": 1.0}
