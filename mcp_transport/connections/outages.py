"""How the Redis clients ride out an outage (a stall, a restart, a failover) of up to
REDIS_OUTAGE_TOLERANCE seconds: redis-py's retries bound in time (``connection_options()``), and
what a Redis error says happened, for a log line (``redis_failure()``)."""
import time

import redis
import redis.asyncio.retry
import redis.retry
from redis.backoff import ExponentialBackoff

from ..conf import get_config

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
