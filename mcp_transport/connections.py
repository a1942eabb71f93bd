"""Redis clients: one asyncio client (and connection pool) per event loop.

The URL is ``MCP_TRANSPORT["REDIS_URL"]`` or the LOCATION of the django-redis cache named by
``CACHE_ALIAS``, so a project configures Redis once, in CACHES.
"""
import asyncio
import hashlib
import time
import weakref

import redis
import redis.asyncio as aredis
import redis.asyncio.retry
import redis.retry
from redis.backoff import ExponentialBackoff

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


def async_redis() -> aredis.Redis:
    """The asyncio client of the running loop (clients cannot be shared across loops)."""
    loop = asyncio.get_running_loop()
    client = _async_clients.get(loop)
    if client is None:
        # A blocking pool: with a thousand streams appending at once, a command waits for a
        # free connection instead of failing with "Too many connections" (redis-py's default
        # pool raises at 100).
        # It waits for a free connection as long as a command rides out an outage: during a
        # stall every connection is busy waiting for its reply.
        config = get_config()
        pool = aredis.BlockingConnectionPool.from_url(
            redis_url(), decode_responses=True, max_connections=config["REDIS_MAX_CONNECTIONS"],
            timeout=max(20, config["REDIS_OUTAGE_TOLERANCE"] * 2), **connection_options())
        client = _async_clients[loop] = aredis.Redis(connection_pool=pool)
    return client


_sync_client = None


def sync_redis():
    """A blocking client for code outside the event loop (admin actions, commands, signals)."""
    global _sync_client
    if _sync_client is None:
        _sync_client = redis.Redis.from_url(redis_url(), decode_responses=True,
                                            **connection_options(asynchronous=False))
    return _sync_client


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
    return Keys(get_config()["KEY_PREFIX"])
