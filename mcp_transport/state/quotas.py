"""Per-client limits that every process must see alike, kept in Redis (one script call each).

- sessions per client address (``MAX_SESSIONS_PER_ADDRESS``): a sorted set of the address's
  session ids, scored by when they were admitted. A DELETE takes its session out at once; a
  session that idled out stops counting once its live key is gone (the admission writes that
  key in the same script call; entries younger than ``ADMISSION_GRACE_SECONDS`` are not checked);
- sessions an address opens per period (``SESSION_OPEN_RATE``): a token bucket per address
  (rates.TAKE_FUNCTION), taken in that same script call once the count admits the session, so
  an address that opens and DELETEs sessions in a loop (each leaves a row behind) is slowed to
  the rate, at no round trip of its own;
- calls running at once, per session (``MAX_CALLS_PER_SESSION``) and, for the sessionless
  2026-07-28 era, per caller (``MAX_CALLS_PER_CALLER``: the principal when authorization is on,
  else the client address). What runs in the background is counted across processes, in a
  sorted set per owner scored by the time each entry expires (the entry of a process that died
  goes by itself): a background job counts as the call it is until it ends, queued, running or
  waiting for its client (``hand_to_job``); its entry is ``job:<id>``, freed by whoever ends the
  job (running/jobs/outcome.finish) and, should that process die first, by the next admission the owner is
  refused (``reclaim_ended_jobs``: ended jobs' entries go, a job whose worker was killed is
  declared lost first). A call answered inline is counted in its own process (``_inline``),
  added to that set's count at admission: what it spends (this event loop, its threads) is the
  process's, so a count in Redis would buy nothing but two round trips per call (issue 19). The
  set's count comes with the session's read (sessions.load_for_call), so a 2025-11-25 inline
  call costs that one round trip. A 2026-07-28 caller has no such read: the process keeps its
  last reading of each caller's count for ``CALLER_COUNT_MEMORY_SECONDS`` (``_readings``), so a
  busy caller's inline calls cost none. A job this process starts for the caller drops the
  reading at once; one started by another process goes unseen that long at most, and a
  refusal is always read afresh (nobody is refused on an old reading);
- a ``tools/call``'s place in its caller's rate window (``RATE_LIMIT``, rates.py), taken by the
  same script as the count of running calls when the session's read did not take it;
- ``resources/subscribe`` URIs per session (``MAX_SUBSCRIPTIONS_PER_SESSION``);
- bytes replayed to a caller per window (``REPLAY_BYTES_PER_CALLER`` per
  ``REPLAY_WINDOW_SECONDS``): a 198-byte resume can replay a 1 MB result, again and again;
- and, with no Redis of its own, the size of one stored event (``within_event_size``).

A refusal is counted as ``limit_refusals:<limit>`` (metrics.py).
"""
import functools
import hashlib
import logging
import secrets
import time
import weakref
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Awaitable, Optional

from channels.db import database_sync_to_async

from . import metrics, rates
from ..conf import get_config, per_config
from ..connections import async_redis, keys
from ..protocol import jsonrpc
from ..protocol.errors import InvalidParams, LimitReached

logger = logging.getLogger(__name__)

ADMIT_SESSION_LUA = rates.TAKE_FUNCTION + """
-- KEYS[1]: the address's set of session ids, KEYS[2]: the new session's live copy (KEYS[3]: the
-- address's bucket of session openings). ARGV: limit, prefix of session keys, new id, now (ms),
-- the set's ttl (s), grace (ms), the copy, its ttl (s) (then the bucket's five, rates.take_args).
-- Returns -1 when admitted (the copy written: one step), -(1 + ms until the address may open
-- one again) over its rate, else the seconds until the soonest of the address's sessions
-- expires (the Retry-After).
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
if KEYS[3] then
  local taken = take_tokens(KEYS[3], 9)
  if taken < 0 then return taken - 1 end
end
redis.call('ZADD', key, ARGV[4], ARGV[3])
redis.call('EXPIRE', key, ARGV[5])
redis.call('SET', KEYS[2], ARGV[7], 'EX', ARGV[8])
return -1
"""

ADMIT_CALL_LUA = rates.CHARGE_FUNCTION + """
-- KEYS[1]: the owner's running calls (KEYS[2]: the caller's rate window). ARGV: limit, now (ms),
-- token, expiry (ms), ttl (ms), the owner's calls running inline in the calling process (then the
-- rate's four, rates.Charge.args). {1, -1}: admitted; {0}: over the limit (the rate untouched);
-- {0, ms}: over the rate.
local key = KEYS[1]
redis.call('ZREMRANGEBYSCORE', key, '-inf', ARGV[2])
if redis.call('ZCARD', key) + tonumber(ARGV[6]) >= tonumber(ARGV[1]) then return {0} end
if KEYS[2] then
  local wait = charge_rate(KEYS[2], 7)
  if wait >= 0 then return {0, wait} end
end
redis.call('ZADD', key, ARGV[4], ARGV[3])
if redis.call('PTTL', key) < tonumber(ARGV[5]) then redis.call('PEXPIRE', key, ARGV[5]) end
return {1, -1}
"""

RUNNING_CALLS_LUA = rates.CHARGE_FUNCTION + """
-- KEYS[1]: the owner's running calls (KEYS[2]: the caller's rate window). ARGV: now (ms) (then
-- the rate's four). How many run now, expired entries gone ({how many, the rate's answer}).
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if KEYS[2] then return {redis.call('ZCARD', KEYS[1]), charge_rate(KEYS[2], 2)} end
return redis.call('ZCARD', KEYS[1])
"""

HAND_TO_JOB_LUA = """
-- KEYS[1]: the owner's running calls, KEYS[2]: the job's record of its owner. ARGV: the call's
-- token (or ''), the job's entry, its expiry (ms), ttl (ms).
if ARGV[1] ~= '' then redis.call('ZREM', KEYS[1], ARGV[1]) end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[4]) then redis.call('PEXPIRE', KEYS[1], ARGV[4]) end
redis.call('SET', KEYS[2], KEYS[1], 'PX', ARGV[4])
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

CHARGE_REPLAY_LUA = """
-- KEYS[1]: the caller's replayed bytes in this window. ARGV: bytes, limit, window (ms).
-- Returns -1 when charged, else the milliseconds until the window ends (the Retry-After).
-- A first replay larger than the whole budget still goes: the budget never locks anyone out.
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
if used > 0 and used + tonumber(ARGV[1]) > tonumber(ARGV[2]) then
  local left = redis.call('PTTL', KEYS[1])
  if left > 0 then return left end
end
if redis.call('INCRBY', KEYS[1], ARGV[1]) == tonumber(ARGV[1]) then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return -1
"""

_scripts = weakref.WeakKeyDictionary()  # client -> {lua: Script}


def script(lua):
    """The ``redis.Script`` of ``lua`` on this loop's client (EVALSHA, loaded once)."""
    client = async_redis()
    scripts = _scripts.setdefault(client, {})
    if lua not in scripts:
        scripts[lua] = client.register_script(lua)
    return scripts[lua]


#: Seconds an admitted session counts even without its live key (being created meanwhile).
ADMISSION_GRACE_SECONDS = 60


def _now_ms() -> int:
    return int(time.time() * 1000)


async def admit_session(address: str, session_id: str, copy: str, ttl: int) -> None:
    """Count a new session against its client address (MAX_SESSIONS_PER_ADDRESS, and its
    SESSION_OPEN_RATE) and write its live copy (``copy``, for ``ttl`` seconds), in one script
    call; or raise LimitReached and write nothing."""
    config = get_config()
    limit, idle = config["MAX_SESSIONS_PER_ADDRESS"], config["SESSION_IDLE_TIMEOUT"]
    names, rate = keys(), session_open_rate()
    script_keys = [names.address_sessions(address), names.session(session_id)]
    args = [limit, names.session(""), session_id, _now_ms(), idle + 60, ADMISSION_GRACE_SECONDS * 1000, copy, ttl]
    if rate is not None:
        script_keys.append(names.session_openings(address))
        args += rates.take_args(rate)
    wait = await script(ADMIT_SESSION_LUA)(keys=script_keys, args=args)
    if wait < -1:  # -(1 + ms until a token is back)
        metrics.incr("limit_refusals:session_open_rate")
        seconds = rates.token_retry_after((-wait - 1) / 1000, rate)
        raise LimitReached(f"This address has opened its {rate.calls} sessions per {rate.period} "
                           f"(SESSION_OPEN_RATE {rate.text}): retry in {seconds} s.", retry_after=seconds)
    if wait >= 0:
        metrics.incr("limit_refusals:sessions_per_address")
        raise LimitReached(f"This address already holds {limit} open sessions: end one (DELETE) or retry later.",
                           retry_after=wait)


@per_config
def session_open_rate() -> Optional[rates.Rate]:
    """SESSION_OPEN_RATE as a Rate, or None."""
    text = get_config()["SESSION_OPEN_RATE"]
    return rates.parse(text) if text else None


#: Seconds a background job's entry lasts if nobody releases it: longer than a job lives, since
#: whoever ends it frees it, and a refused admission frees the entries of ended jobs.
JOB_ENTRY_SECONDS = 24 * 3600
JOB_ENTRY = "job:"


@dataclass
class Slot:
    """A request's place among its owner's running calls (``admit_call``): ``release_call``
    frees it when the request ends, unless a job it started took it over (``hand_to_job``).
    ``local``: an inline call's place, counted in ``_inline`` rather than in Redis."""

    key: str
    token: Optional[str]
    local: bool = False


#: The owner's calls running inline in this process, by the key of its set of running calls.
_inline = Counter()
LOCAL = "local"


async def admit_call(session_id: str, running: Optional[int] = None, background: bool = False,
                     rate: Optional[rates.Charge] = None) -> Slot:
    """Count a request that starts running in this session (MAX_CALLS_PER_SESSION), or raise
    LimitReached (the request is not run). ``running``: the session's running background calls
    as its read counted them (``sessions.load_for_call``), so an inline call needs no round trip
    of its own; ``background``: the request starts a job, counted in Redis at once; ``rate``: its
    place in its caller's rate window, taken in the same script if that read did not take it."""
    limit = get_config()["MAX_CALLS_PER_SESSION"]
    return await _admit(keys().calls(session_id), limit, running, background, "calls_per_session",
                        f"This session already runs {limit} requests at once: wait for one to finish.", rate)


@functools.lru_cache(maxsize=4096)  # asked on every sessionless call, by the same few callers
def caller_key(principal_key: str, address: str) -> str:
    """Who a per-caller limit counts: the principal when authorization is on, else the client
    address (TRUSTED_PROXIES honoured); hashed, so a key of bounded length."""
    caller = f"principal:{principal_key}" if principal_key else f"address:{address}"
    return "caller:" + hashlib.sha256(caller.encode()).hexdigest()[:32]


def admit_caller_call(principal_key: str, address: str, background: bool = False,
                      rate: Optional[rates.Charge] = None) -> Awaitable[Slot]:
    """The same for a sessionless (2026-07-28) request, counted per caller (MAX_CALLS_PER_CALLER)."""
    return admit_caller(caller_key(principal_key, address), background, rate)


def admit_caller(caller: str, background: bool = False, rate: Optional[rates.Charge] = None) -> Awaitable[Slot]:
    """``admit_caller_call`` for a caller key already made (``caller_key``)."""
    limit = get_config()["MAX_CALLS_PER_CALLER"]
    return _admit(keys().calls(caller), limit, None, background, "calls_per_caller",
                  f"This client already runs {limit} requests at once: wait for one to finish.", rate)


async def charge_replay(principal_key: str, address: str, size: int) -> None:
    """Count ``size`` bytes a resume is about to replay against its caller's budget
    (REPLAY_BYTES_PER_CALLER per REPLAY_WINDOW_SECONDS), or raise LimitReached (429 with the
    seconds until the window ends) and nothing is sent. A resume that replays nothing costs no
    round trip: an honest client that was caught up pays nothing."""
    config = get_config()
    limit = config["REPLAY_BYTES_PER_CALLER"]
    if limit is None or size <= 0:
        return
    window_ms = int(config["REPLAY_WINDOW_SECONDS"] * 1000)
    wait_ms = await script(CHARGE_REPLAY_LUA)(keys=[keys().replayed(caller_key(principal_key, address))],
                                              args=[size, limit, window_ms])
    if wait_ms >= 0:
        metrics.incr("limit_refusals:replay_bytes")
        raise LimitReached(f"This client was sent {limit} bytes of replays in the last "
                           f"{config['REPLAY_WINDOW_SECONDS']} s: resume later.", retry_after=max(wait_ms / 1000, 1))


async def running_calls(key: str, rate: Optional[rates.Charge] = None) -> int:
    """How many of the owner's calls run in the background now, whatever the process (one round
    trip); with ``rate``, the call's place in its caller's rate window is taken in the same script."""
    now = _now_ms()
    if rate is None:
        return await script(RUNNING_CALLS_LUA)(keys=[key], args=[now])
    running, wait = await script(RUNNING_CALLS_LUA)(keys=[key, rate.key], args=[now, *rate.args(now)])
    rate.took(wait)
    return running


async def _admit(key: str, limit: int, running: Optional[int], background: bool, label: str, refusal: str,
                 rate: Optional[rates.Charge] = None) -> Slot:
    for attempt in range(2):
        slot = await (_admit_background(key, limit, rate) if background else _admit_inline(key, limit, running, rate))
        if slot is not None:
            return slot
        if rates.refused(rate):
            raise rates.refusal(rate)
        running = None  # counted again after the reclaim
        if attempt or not await reclaim_ended_jobs(key):
            break
    metrics.incr(f"limit_refusals:{label}")
    raise LimitReached(refusal, retry_after=1)


async def _admit_inline(key: str, limit: int, running: Optional[int], rate: Optional[rates.Charge]) -> Optional[Slot]:
    if running is None:
        running = _recent_reading(key)
        # A refusal is read afresh; a rate limited call's place is taken with the reading.
        if running is None or running + _inline[key] >= limit or rates.uncounted(rate):
            counted = running_calls(key, rate) if rates.uncounted(rate) else running_calls(key)
            running = _remember(key, await counted)
    # No await between the check and the count: this process's own calls are counted exactly.
    if running + _inline[key] >= limit or (rate is not None and rates.refused(rate)):
        return None
    _inline[key] += 1
    return Slot(key, LOCAL, local=True)


#: The last count of each owner's background calls this process read (``running_calls``), and
#: when: (count, time.monotonic()). At most READINGS_KEPT owners, the least recent dropped first.
_readings = OrderedDict()
READINGS_KEPT = 10_000


def _recent_reading(key: str) -> Optional[int]:
    """The owner's background calls as last read, if within CALLER_COUNT_MEMORY_SECONDS."""
    reading = _readings.get(key)
    if reading is None or time.monotonic() - reading[1] >= (get_config()["CALLER_COUNT_MEMORY_SECONDS"] or 0):
        return None
    return reading[0]


def _remember(key: str, running: int) -> int:
    _readings[key] = (running, time.monotonic())
    _readings.move_to_end(key)
    if len(_readings) > READINGS_KEPT:
        _readings.popitem(last=False)
    return running


def _forget_reading(key: str) -> None:
    """The owner's count changed here (a job of this process took a place): read it next time."""
    _readings.pop(key, None)


async def _admit_background(key: str, limit: int, rate: Optional[rates.Charge]) -> Optional[Slot]:
    _forget_reading(key)
    # An entry outlives the longest a call may run, then goes by itself if never released.
    lifetime_ms = int(((get_config()["TOOL_MAX_SECONDS"] or 24 * 3600) + 60) * 1000)
    token, now = secrets.token_hex(8), _now_ms()
    names, args = [key], [limit, now, token, now + lifetime_ms, lifetime_ms, _inline[key]]
    charging = rates.uncounted(rate)
    if charging:
        names, args = [key, rate.key], args + rate.args(now)
    answer = await script(ADMIT_CALL_LUA)(keys=names, args=args)
    if charging and len(answer) > 1:
        rate.took(answer[1])
    return Slot(key, token) if answer[0] else None


def _forget_inline(key: str) -> None:
    _inline[key] -= 1
    if _inline[key] <= 0:
        del _inline[key]


async def release_call(slot: Optional[Slot]) -> None:
    if slot is not None and slot.token is not None:
        token, slot.token = slot.token, None
        if slot.local:
            _forget_inline(slot.key)
        else:
            await async_redis().zrem(slot.key, token)


class PlaceSpent(RuntimeError):
    """The request's place went to a job already, or was freed: it cannot fund another job."""


def take_for_job(slot: Optional[Slot]) -> Optional[Slot]:
    """The request's place, taken at once (no ``await``) for the one job it may start, so two
    jobs started together from one call (``asyncio.gather`` of two ``Context.run_as_task``) cannot
    both count as that call: a call is one place, and a second job would run uncounted. None when
    the request is not counted; PlaceSpent when its place is gone."""
    if slot is None:
        return None
    if slot.token is None:
        raise PlaceSpent("This call has already handed its work to a task; it can start only one.")
    taken, slot.token = Slot(slot.key, slot.token, slot.local), None
    return taken


async def hand_to_job(slot: Optional[Slot], job_id: str) -> None:
    """The request's place goes to the background job it created (a job counts as a call until
    it ends: queued, running or waiting for its client); ``release_job`` frees it. An inline
    call's place leaves this process's count once the job's entry is in Redis."""
    if slot is None:
        return
    token, slot.token = slot.token, None
    ttl_ms = JOB_ENTRY_SECONDS * 1000
    _forget_reading(slot.key)
    try:
        await script(HAND_TO_JOB_LUA)(keys=[slot.key, keys().job_slot(job_id)],
                                      args=["" if slot.local else token or "", JOB_ENTRY + job_id,
                                            _now_ms() + ttl_ms, ttl_ms])
    finally:
        if slot.local and token is not None:
            _forget_inline(slot.key)


async def release_job(job_id: str) -> None:
    """The job ended (whichever process ended it): its place is free."""
    client = async_redis()
    owner = await client.getdel(keys().job_slot(job_id))
    if owner is not None:
        await client.zrem(owner, JOB_ENTRY + job_id)


#: What a refused admission does to each unfinished job of its owner (running/jobs/settling.watch_job,
#: connected in apps.py: a job whose worker was lost ends then).
_watch_job = None


def on_reclaim(watch) -> None:
    """``await watch(job)`` for the unfinished jobs of an owner refused at its limit."""
    global _watch_job
    _watch_job = watch


async def reclaim_ended_jobs(key: str) -> bool:
    """Free the entries of the owner's jobs that ended without freeing theirs (the process that
    ended them died first, or the row is gone), after the ``on_reclaim`` hook has looked at the
    unfinished ones (a worker killed with kill -9 while nobody follows its job: nobody else may). At most once a second per
    owner: a client hammering at its limit does not hammer the database. True if any was freed."""
    client = async_redis()
    if not await client.set(f"{key}:reclaim", "1", nx=True, ex=1):
        return False
    ids = [entry[len(JOB_ENTRY):] for entry in await client.zrange(key, 0, -1) if entry.startswith(JOB_ENTRY)]
    if not ids:
        return False
    rows = await _job_rows(ids)
    running = [job for job in rows.values() if not job.is_terminal] if _watch_job is not None else []
    for job in running:
        await _watch_job(job)  # a lost worker's job ends now (and frees its own entry)
    if running:
        rows = await _job_rows(ids)
    ended = [JOB_ENTRY + job_id for job_id in ids if job_id not in rows or rows[job_id].is_terminal]
    if ended:
        await client.zrem(key, *ended)
    return bool(ended)


@database_sync_to_async
def _job_rows(ids):
    from ..models import McpJob

    return {job.id: job for job in McpJob.objects.filter(id__in=ids)}


async def subscribe(session_id: str, uri: str, ttl: int) -> None:
    """Add ``uri`` to the session's subscriptions, or raise InvalidParams over the limits."""
    config = get_config()
    if len(uri.encode()) > config["MAX_URI_BYTES"]:
        metrics.incr("limit_refusals:uri_bytes")
        raise InvalidParams(f'"uri" is longer than {config["MAX_URI_BYTES"]} bytes.')
    limit, names = config["MAX_SUBSCRIPTIONS_PER_SESSION"], keys()
    added = await script(SUBSCRIBE_LUA)(keys=[names.subscriptions(session_id), names.uri_subscribers(uri)],
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
