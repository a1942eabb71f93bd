"""Each caller's share of the Celery workers: how many of its background jobs may run at once
(MAX_RUNNING_JOBS_PER_CALLER), counted in Redis across every worker.

A caller is its principal (``auth.Principal.key``), else its client address (quotas.caller_key),
in both eras: ``submit`` keeps it in the job's ``context`` (``caller_context``). A worker about to
start a job takes a place among its caller's running jobs (``take_place``, one script call); a
job over the share does not start: it goes back to the queue (deferring.py) and its slot runs
someone else's job meanwhile.

Three sorted sets per caller:

- ``run``: its running jobs, scored by when their place lapses. The worker's watch of the job
  refreshes it every heartbeat (``refresh_place``), its end frees it (``release_place``); a
  worker killed mid-job stops refreshing, and the place is free ``lease_ms()`` later;
- ``wait``: its jobs waiting for a place, scored by their order (when they were created), so
  that a caller's jobs start in the order it sent them: a job starts only when fewer of its
  caller's jobs wait ahead of it than there are free places;
- ``waitend``: when each waiting entry lapses (a job whose message was lost, or revoked: it
  stops holding up the jobs behind it). Each deferral and each wake renews it, and an entry
  that lapsed comes back with its old order when its job is next looked at.
"""
import logging
import time

from ...state import control, quotas, sessions
from ...connections import async_redis, keys

logger = logging.getLogger(__name__)

TAKE_PLACE_LUA = """
-- KEYS: the caller's running jobs, its waiting jobs (by order), their deadlines. ARGV: now
-- (ms), job, limit, the place's end (ms), the job's order, its waiting entry's end (ms), ttl
-- (ms). 1: the job holds a place (it held one already: a redelivery), 0: it waits.
local now, job = tonumber(ARGV[1]), ARGV[2]
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)) do redis.call('ZREM', KEYS[2], id) end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
local ahead = redis.call('ZCOUNT', KEYS[2], '-inf', '(' .. ARGV[5])
local held = redis.call('ZSCORE', KEYS[1], job)
if held or redis.call('ZCARD', KEYS[1]) + ahead < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], ARGV[4], job)
  redis.call('ZREM', KEYS[2], job)
  redis.call('ZREM', KEYS[3], job)
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[7]) then redis.call('PEXPIRE', KEYS[1], ARGV[7]) end
  return 1
end
redis.call('ZADD', KEYS[2], ARGV[5], job)
redis.call('ZADD', KEYS[3], ARGV[6], job)
for i = 2, 3 do
  if redis.call('PTTL', KEYS[i]) < tonumber(ARGV[7]) then redis.call('PEXPIRE', KEYS[i], ARGV[7]) end
end
return 0
"""

REFRESH_PLACE_LUA = """
-- KEYS[1]: the caller's running jobs. ARGV: job, the place's new end (ms), ttl (ms).
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return 1
"""

RELEASE_PLACE_LUA = """
-- KEYS: the caller's running jobs, its waiting jobs, their deadlines. ARGV: job, now (ms),
-- '1' for the next in line anyway. The first waiting job once this one gave a place back (''
-- when it held none, or nobody waits).
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 and ARGV[3] ~= '1' then return '' end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', ARGV[2])) do redis.call('ZREM', KEYS[2], id) end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[2])
local first = redis.call('ZRANGE', KEYS[2], 0, 0)
return first[1] or ''
"""

#: Seconds a waiting entry outlives the moment its job is due to be looked at again: time for
#: its message to reach a free pool process behind other callers' jobs.
WAIT_GRACE_SECONDS = 30


def lease_ms() -> int:
    """How long a running job's place lasts without a refresh: four heartbeats (the job's watch
    refreshes it every beat), and at least the time after which a silent job counts as lost."""
    return control.orphan_after_ms() + int(control.heartbeat_seconds() * 1000)


async def caller_context(context, *, principal: str, session_id: str, slot) -> dict:
    """The job's ``context`` with its ``caller``: the principal's key, else the client address
    (a 2026-07-28 call's place is counted under it already: ``slot``; a 2025-11-25 session keeps
    its address)."""
    return {**(context or {}), "caller": await _caller(principal, session_id, slot, context is not None)}


async def _caller(principal: str, session_id: str, slot, sessionless: bool) -> str:
    if principal:
        return quotas.caller_key(principal, "")
    prefix = keys().calls("")
    if sessionless and slot is not None and slot.key.startswith(prefix + "caller:"):
        return slot.key[len(prefix):]
    if not sessionless:
        try:
            session = await sessions.load(session_id)
        except Exception:  # Redis away: the session counts alone
            logger.warning("reading session %s for its address failed", session_id[:8], exc_info=True)
            session = None
        if session is not None and session.address:
            return quotas.caller_key("", session.address)
    return f"session:{session_id}"


def caller_of(job) -> str:
    """Whose share the job counts in (a job submitted before callers were kept: its principal,
    else its session)."""
    caller = (job.context or {}).get("caller") if isinstance(job.context, dict) else None
    if caller:
        return caller
    return quotas.caller_key(job.principal, "") if job.principal else f"session:{job.session_id}"


def share_keys(caller: str) -> list:
    base = f"{keys().prefix}:jobshare:{caller}"
    return [f"{base}:run", f"{base}:wait", f"{base}:waitend"]


def _now_ms() -> int:
    return int(time.time() * 1000)


def order_of(job) -> int:
    """The job's place in its caller's line: when it was created (ms)."""
    return int(job.created_at.timestamp() * 1000)


async def take_place(job, limit: int, wait_seconds: float) -> bool:
    """A place among its caller's running jobs for ``job`` (at most ``limit``, its turn among the
    caller's waiting jobs respected); False when it must wait, and then it is in the line, to be
    looked at again within ``wait_seconds``."""
    now, lease = _now_ms(), lease_ms()
    wait_end = now + int((wait_seconds + WAIT_GRACE_SECONDS) * 1000)
    ttl = max(lease, wait_end - now) + 60_000
    taken = await quotas.script(TAKE_PLACE_LUA)(
        keys=share_keys(caller_of(job)), args=[now, job.id, limit, now + lease, order_of(job), wait_end, ttl])
    return bool(taken)


async def refresh_place(job) -> None:
    """The running job's place lasts another ``lease_ms()`` (its worker is alive)."""
    lease = lease_ms()
    await quotas.script(REFRESH_PLACE_LUA)(keys=share_keys(caller_of(job))[:1],
                                           args=[job.id, _now_ms() + lease, lease + 60_000])


async def give_back(caller: str, job_id: str, next_anyway: bool = False) -> str:
    """The job holds no place among its caller's running jobs and waits for none now; the
    caller's first waiting job if this freed a place (or ``next_anyway``), else ''."""
    return await quotas.script(RELEASE_PLACE_LUA)(
        keys=share_keys(caller), args=[job_id, _now_ms(), "1" if next_anyway else ""]) or ""


async def renew_wait(job, wait_seconds: float) -> None:
    """The job's waiting entry lasts until ``wait_seconds`` (and the grace) from now."""
    _run, _wait, wait_end = share_keys(caller_of(job))
    await async_redis().zadd(wait_end, {job.id: _now_ms() + int((wait_seconds + WAIT_GRACE_SECONDS) * 1000)},
                             xx=True)
