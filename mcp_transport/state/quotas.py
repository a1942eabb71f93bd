"""Per-client limits that every process must see alike, kept in Redis (one script call each).

- sessions per client address (``MAX_SESSIONS_PER_ADDRESS``): a sorted set of the address's
  session ids, scored by when they were admitted. A DELETE takes its session out at once; a
  session that idled out stops counting once its live key is gone (an admitted session's key is
  written after its database row, so only entries older than ``ADMISSION_GRACE_SECONDS`` are
  checked for it);
- requests of a session running at once (``MAX_CALLS_PER_SESSION``): a sorted set scored by the
  time each entry expires, so the entry of a process that died goes by itself;
- ``resources/subscribe`` URIs per session (``MAX_SUBSCRIPTIONS_PER_SESSION``);
- and, with no Redis of its own, the size of one stored event (``within_event_size``).

A refusal is counted as ``limit_refusals:<limit>`` (metrics.py).
"""
import logging
import math
import secrets
import time
import weakref

from . import metrics
from ..conf import get_config
from ..connections import async_redis, keys
from ..protocol import jsonrpc
from ..protocol.errors import InvalidParams, TransportError

logger = logging.getLogger(__name__)

ADMIT_SESSION_LUA = """
-- KEYS[1]: the address's set of session ids. ARGV: limit, prefix of session keys, new id,
-- now (ms), the set's ttl (s), grace (ms). Returns -1 when admitted, else the seconds until the
-- soonest of the address's sessions expires (the Retry-After).
local key, limit, prefix = KEYS[1], tonumber(ARGV[1]), ARGV[2]
if redis.call('ZCARD', key) >= limit then
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', key, '-inf', tonumber(ARGV[4]) - tonumber(ARGV[6]))) do
    if redis.call('EXISTS', prefix .. id) == 0 then redis.call('ZREM', key, id) end
  end
end
if redis.call('ZCARD', key) >= limit then
  local soonest = -1
  for _, id in ipairs(redis.call('ZRANGE', key, 0, -1)) do
    local left = redis.call('TTL', prefix .. id)
    if left > 0 and (soonest < 0 or left < soonest) then soonest = left end
  end
  return math.max(soonest, 1)
end
redis.call('ZADD', key, ARGV[4], ARGV[3])
redis.call('EXPIRE', key, ARGV[5])
return -1
"""

ADMIT_CALL_LUA = """
-- KEYS[1]: the session's running requests. ARGV: limit, now (ms), token, expiry (ms), ttl (ms).
local key = KEYS[1]
redis.call('ZREMRANGEBYSCORE', key, '-inf', ARGV[2])
if redis.call('ZCARD', key) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', key, ARGV[4], ARGV[3])
redis.call('PEXPIRE', key, ARGV[5])
return 1
"""

SUBSCRIBE_LUA = """
-- KEYS: the session's subscriptions, the URI's subscribers. ARGV: limit, uri, session id, ttl (s).
if redis.call('SISMEMBER', KEYS[1], ARGV[2]) == 0 and redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[1]) then
  return 0
end
redis.call('SADD', KEYS[1], ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('SADD', KEYS[2], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[4])
return 1
"""

_scripts = weakref.WeakKeyDictionary()  # client -> {lua: Script}


def _script(lua):
    client = async_redis()
    scripts = _scripts.setdefault(client, {})
    if lua not in scripts:
        scripts[lua] = client.register_script(lua)
    return scripts[lua]


#: Seconds an admitted session counts even without its live key (being created meanwhile).
ADMISSION_GRACE_SECONDS = 60


def _now_ms() -> int:
    return int(time.time() * 1000)


class LimitReached(TransportError):
    """429 Too Many Requests, with the seconds after which trying again may work."""

    http_status = 429

    def __init__(self, message, retry_after):
        super().__init__(message, headers=[("retry-after", str(math.ceil(retry_after)))])


async def admit_session(address: str, session_id: str) -> None:
    """Count a new session against its client address, or raise LimitReached."""
    config = get_config()
    limit, idle = config["MAX_SESSIONS_PER_ADDRESS"], config["SESSION_IDLE_TIMEOUT"]
    names = keys()
    wait = await _script(ADMIT_SESSION_LUA)(
        keys=[names.address_sessions(address)],
        args=[limit, names.session(""), session_id, _now_ms(), idle + 60, ADMISSION_GRACE_SECONDS * 1000])
    if wait >= 0:
        metrics.incr("limit_refusals:sessions_per_address")
        raise LimitReached(f"This address already holds {limit} open sessions: end one (DELETE) or retry later.",
                           retry_after=wait)


async def admit_call(session_id: str):
    """Count a request that starts running in this session; returns its token for
    ``release_call``, or raises LimitReached (the request is not run)."""
    config = get_config()
    limit = config["MAX_CALLS_PER_SESSION"]
    # An entry outlives the longest a call may run, then goes by itself if never released.
    lifetime_ms = int(((config["TOOL_MAX_SECONDS"] or 24 * 3600) + 60) * 1000)
    token, now = secrets.token_hex(8), _now_ms()
    admitted = await _script(ADMIT_CALL_LUA)(keys=[keys().calls(session_id)],
                                             args=[limit, now, token, now + lifetime_ms, lifetime_ms])
    if not admitted:
        metrics.incr("limit_refusals:calls_per_session")
        raise LimitReached(f"This session already runs {limit} requests at once: wait for one to finish.",
                           retry_after=1)
    return token


async def release_call(session_id: str, token) -> None:
    if token is not None:
        await async_redis().zrem(keys().calls(session_id), token)


async def subscribe(session_id: str, uri: str, ttl: int) -> None:
    """Add ``uri`` to the session's subscriptions, or raise InvalidParams over the limits."""
    config = get_config()
    if len(uri.encode()) > config["MAX_URI_BYTES"]:
        metrics.incr("limit_refusals:uri_bytes")
        raise InvalidParams(f'"uri" is longer than {config["MAX_URI_BYTES"]} bytes.')
    limit, names = config["MAX_SUBSCRIPTIONS_PER_SESSION"], keys()
    added = await _script(SUBSCRIBE_LUA)(keys=[names.subscriptions(session_id), names.uri_subscribers(uri)],
                                         args=[limit, uri, session_id, ttl])
    if not added:
        metrics.incr("limit_refusals:subscriptions")
        raise InvalidParams(f"This session already holds {limit} subscriptions: unsubscribe from one first.")


def within_event_size(message, data):
    """MAX_EVENT_BYTES: every event is kept in Redis for STREAM_TTL (jsonrpc.within_size)."""
    fitted, fitted_data = jsonrpc.within_size(message, data, get_config()["MAX_EVENT_BYTES"])
    if fitted is not message:
        metrics.incr("limit_refusals:event_bytes")
        logger.warning("a %d-byte message exceeded MAX_EVENT_BYTES: %s", len(data),
                       "replaced with an error" if fitted is not None else "dropped")
    return fitted, fitted_data
