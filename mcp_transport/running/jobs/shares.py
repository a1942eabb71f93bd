"""Each caller's share of the Celery workers, and whose turn a free slot is: how many of its
background jobs may run at once (MAX_RUNNING_JOBS_PER_CALLER), counted in Redis across every
worker, and which caller's job a freed slot runs.

A caller is its principal (``auth.Principal.key``), else its client address (quotas.caller_key),
in both eras: ``submit`` keeps its key in the job's ``context`` (rows.caller_of). A worker about
to start a job takes a place among its caller's running jobs (``take_place``, one script call); a
job that may not start goes back to the queue (submitting.defer) and its slot runs someone
else's job meanwhile. It may not start when:

- ``share``: its caller runs its share already (counting its own jobs waiting ahead of it: a
  caller's jobs start in the order it sent them);
- ``room``: its caller runs a job already and this is the worker's last free slot: that one is
  kept for a caller running none, so two callers cannot take every slot from a third;
- ``turn``: another caller waiting for this queue runs fewer jobs, or as many and was served
  less recently (its latest job started earlier): that caller's job goes first. Before, a slot
  freed by a hog's long job went to the same hog's next job, and another user's short job
  waited a whole generation of long jobs (77 s behind 40 s jobs). A job yields so at most
  ``TURN_YIELDS`` times: a waiting job whose message was lost holds nobody up for long.

Every job is in its queue's line from its submission (``enter_line``), so a worker knows of a
job still in the broker behind others: the first look at a hog's next job already lets it go
first. A freed place (``give_back``) names the job whose turn it is, of any caller.

All keys carry one hash tag (``{jobshare}``): a script touches other callers' keys, and on a
Redis Cluster they live on one node. Per caller:

- ``run``: its running jobs, scored by when their place lapses. The worker's watch of the job
  refreshes it every heartbeat (``refresh_place``), its end frees it (``give_back``); a
  worker killed mid-job stops refreshing, and the place is free ``lease_ms()`` later;
- ``wait``: its jobs waiting for a place, scored by their order (when they were created);
- ``waitend``: when each waiting entry lapses (a job whose message was lost, or revoked: it
  stops holding up the jobs behind it). Each deferral and each wake renews it, and an entry
  that lapsed comes back with its old order when its job is next looked at.

Per queue: ``waiting`` (every waiting job, scored by when its entry lapses) and ``owners`` (job
-> caller). Per worker: ``worker:<hostname>`` (the jobs running in its slots, as ``run``). And
``served``: when each caller's latest job started.
"""
import time
from dataclasses import dataclass

from ...connections import async_redis, keys
from ...state import control, quotas
from .rows import caller_of

#: The waiting jobs of a queue a script looks at for the next turn (the oldest entries first).
TURN_SCAN = 500
#: How many times one job gives its turn to other callers' jobs before it takes a free slot
#: anyway (the one it yields to may never come: its message lost with a broker).
TURN_YIELDS = 5
#: Seconds the entry of a job nobody has looked at yet lasts: a broker may hold it that long
#: behind other jobs (a deferral renews it for less).
LINE_SECONDS = 3600

_LAPSE = """
local function lapse(wait, waitend, now)
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', waitend, '-inf', now)) do redis.call('ZREM', wait, id) end
  redis.call('ZREMRANGEBYSCORE', waitend, '-inf', now)
end
local function keep(key, ttl)
  if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
end
-- The best waiting job of the queue (KEYS[4], owners KEYS[5], served KEYS[6]) for a slot: its
-- caller runs the fewest, was served least recently, then the oldest; nil when none may run.
-- ``better(running, served)``: whether a caller so placed may take it (nil: any).
local function next_turn(base, now, limit, free, skip_caller, skip_job, better, scan)
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now)) do redis.call('HDEL', KEYS[5], id) end
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
  local best, runs = nil, {}
  for _, other in ipairs(redis.call('ZRANGE', KEYS[4], 0, scan - 1)) do
    local who = redis.call('HGET', KEYS[5], other)
    if who and who ~= skip_caller and other ~= skip_job then
      local theirs = runs[who]
      if theirs == nil then
        redis.call('ZREMRANGEBYSCORE', base .. who .. ':run', '-inf', now)
        theirs = redis.call('ZCARD', base .. who .. ':run')
        runs[who] = theirs
      end
      if (limit == 0 or theirs < limit) and (theirs == 0 or free > 1) then
        local served = tonumber(redis.call('ZSCORE', KEYS[6], who)) or 0
        if better == nil or better(theirs, served) then
          local order = tonumber(redis.call('ZSCORE', base .. who .. ':wait', other)) or 0
          if best == nil or theirs < best[1] or (theirs == best[1] and (served < best[2]
              or (served == best[2] and order < best[3]))) then
            best = {theirs, served, order, other}
          end
        end
      end
    end
  end
  return best
end
"""

TAKE_PLACE_LUA = _LAPSE + """
-- KEYS: the caller's running jobs, its waiting jobs (by order), their deadlines; the queue's
-- waiting jobs, their owners; when callers were served; the worker's running jobs. ARGV: now
-- (ms), job, limit, the place's end (ms), the job's order, its waiting entry's end (ms), ttl
-- (ms), caller, the callers' key base, the worker's slots (0: unknown), turn scan, turn yields,
-- '1' to keep the worker's last free slot for a caller running no job.
-- {1, '', next}: the job holds a place (it held one already: a redelivery), and ``next`` is the
-- job whose turn the worker's next free slot is, if it has another; {0, why, job whose turn it
-- is}: it waits, in its caller's line and its queue's.
local now, job, limit, ttl = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[7])
local caller, base, slots = ARGV[8], ARGV[9], tonumber(ARGV[10])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[7], '-inf', now)
lapse(KEYS[2], KEYS[3], now)
local yields = KEYS[4] .. ':yields'
local function wait(why, turn)
  redis.call('ZADD', KEYS[2], ARGV[5], job)
  redis.call('ZADD', KEYS[3], ARGV[6], job)
  redis.call('ZADD', KEYS[4], ARGV[6], job)
  redis.call('HSET', KEYS[5], job, caller)
  for i = 2, 5 do keep(KEYS[i], ttl) end
  return {0, why, turn or ''}
end
local running = redis.call('ZCARD', KEYS[1])
local free = slots > 0 and slots - redis.call('ZCARD', KEYS[7]) or 1000000
-- What the room rule sees: the free slots when it holds, else as many as anyone wants.
local room_free = ARGV[13] == '1' and free or 1000000
if not redis.call('ZSCORE', KEYS[1], job) then
  if running + redis.call('ZCOUNT', KEYS[2], '-inf', '(' .. ARGV[5]) >= limit then return wait('share') end
  if running > 0 and room_free <= 1 then return wait('room') end
  if tonumber(redis.call('HGET', yields, job) or '0') < tonumber(ARGV[12]) then
    local mine = tonumber(redis.call('ZSCORE', KEYS[6], caller)) or 0
    local turn = next_turn(base, now, limit, room_free, caller, job, function(theirs, served)
      return theirs < running or (theirs == running and served < mine) end, tonumber(ARGV[11]))
    if turn then
      redis.call('HINCRBY', yields, job, 1)
      keep(yields, ttl)
      return wait('turn', turn[4])
    end
  end
  redis.call('ZADD', KEYS[6], now, caller)
  redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', now - 86400000)
  keep(KEYS[6], 86400000)
end
redis.call('ZADD', KEYS[1], ARGV[4], job)
redis.call('ZREM', KEYS[2], job)
redis.call('ZREM', KEYS[3], job)
redis.call('ZREM', KEYS[4], job)
redis.call('HDEL', KEYS[5], job)
redis.call('HDEL', yields, job)
keep(KEYS[1], ttl)
if slots == 0 then return {1, '', ''} end
redis.call('ZADD', KEYS[7], ARGV[4], job)
keep(KEYS[7], ttl)
-- Another slot of this worker is free: the job whose turn it is (one that yielded its turn to
-- this one, say) need not wait for its countdown.
local after = next_turn(base, now, limit, room_free - 1, '', job, nil, tonumber(ARGV[11]))
return {1, '', (free > 1 and after) and after[4] or ''}
"""

ENTER_LINE_LUA = """
-- KEYS: the caller's waiting jobs, their deadlines, the queue's waiting jobs, their owners.
-- ARGV: job, its order, its entry's end (ms), caller, ttl (ms).
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
redis.call('HSET', KEYS[4], ARGV[1], ARGV[4])
for i = 1, 4 do
  if redis.call('PTTL', KEYS[i]) < tonumber(ARGV[5]) then redis.call('PEXPIRE', KEYS[i], ARGV[5]) end
end
return 1
"""

REFRESH_PLACE_LUA = """
-- KEYS: the caller's running jobs, the worker's. ARGV: job, the place's new end (ms), ttl (ms).
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], ARGV[2], ARGV[1])
  if redis.call('PTTL', KEYS[i]) < tonumber(ARGV[3]) then redis.call('PEXPIRE', KEYS[i], ARGV[3]) end
end
return 1
"""

RELEASE_PLACE_LUA = _LAPSE + """
-- KEYS: as TAKE_PLACE_LUA's. ARGV: job, now (ms), '1' for the next turn anyway, the callers'
-- key base, limit (0: unknown), turn scan. The waiting job whose turn it is once this one gave
-- a place back ('' when it held none, or nobody waits).
local job, now = ARGV[1], tonumber(ARGV[2])
for i = 2, 4 do redis.call('ZREM', KEYS[i], job) end
redis.call('HDEL', KEYS[5], job)
redis.call('HDEL', KEYS[4] .. ':yields', job)
local freed = redis.call('ZREM', KEYS[1], job) + redis.call('ZREM', KEYS[7], job)
if freed == 0 and ARGV[3] ~= '1' then return '' end
local turn = next_turn(ARGV[4], now, tonumber(ARGV[5]), 1000000, '', job, nil, tonumber(ARGV[6]))
return turn and turn[4] or ''
"""


@dataclass
class Turn:
    """What ``take_place`` decided: the job runs (``taken``), or waits ``why`` ("share", "room"
    or "turn"); ``first``: the job whose turn it is (that goes first, or that the worker's next
    free slot is for), to be woken."""

    taken: bool
    why: str = ""
    first: str = ""


#: Seconds a waiting entry outlives the moment its job is due to be looked at again: time for
#: its message to reach a free pool process behind other callers' jobs.
WAIT_GRACE_SECONDS = 30


def lease_ms() -> int:
    """How long a running job's place lasts without a refresh: four heartbeats (the job's watch
    refreshes it every beat), and at least the time after which a silent job counts as lost."""
    return control.orphan_after_ms() + int(control.heartbeat_seconds() * 1000)


def key_base() -> str:
    """Where every share key begins: one hash tag for all of them (see above)."""
    return f"{keys().prefix}:{{jobshare}}:"


def share_keys(caller: str) -> list:
    base = key_base() + caller
    return [f"{base}:run", f"{base}:wait", f"{base}:waitend"]


def _keys(caller: str, queue: str, worker: str) -> list:
    """A script's KEYS: the caller's three, the queue's two, ``served``, the worker's slots."""
    base = key_base()
    return [*share_keys(caller), f"{base}queue:{queue}:waiting", f"{base}queue:{queue}:owners", f"{base}served",
            f"{base}worker:{worker}"]


def _now_ms() -> int:
    return int(time.time() * 1000)


def order_of(job) -> int:
    """The job's place in its caller's line: when it was created (ms)."""
    return int(job.created_at.timestamp() * 1000)


async def enter_line(job, queue: str) -> None:
    """The submitted job waits in its caller's line and its queue's until a worker starts it
    (or its entry lapses after LINE_SECONDS): a worker that looks at another caller's job
    meanwhile knows it waits (``take_place``: ``turn``)."""
    wait_end = _now_ms() + LINE_SECONDS * 1000
    waiting, ends, queued, owners = _keys(caller_of(job), queue, "")[1:5]
    await quotas.script(ENTER_LINE_LUA)(keys=[waiting, ends, queued, owners],
                                        args=[job.id, order_of(job), wait_end, caller_of(job), LINE_SECONDS * 1000 + 60_000])


async def take_place(job, limit: int, wait_seconds: float, *, queue: str = "", worker: str = "", slots: int = 0,
                     room: bool = False) -> Turn:
    """A place among its caller's running jobs for ``job`` (at most ``limit``, its turn among the
    caller's waiting jobs and among callers respected) in a slot of ``worker`` (of ``slots``; 0:
    not counted), its last free one kept for a caller running no job if ``room``; else a Turn
    saying why it waits, and it is in the line, to be looked at again within ``wait_seconds``."""
    now, lease = _now_ms(), lease_ms()
    wait_end = now + int((wait_seconds + WAIT_GRACE_SECONDS) * 1000)
    ttl = max(lease, wait_end - now) + 60_000
    caller = caller_of(job)
    taken, why, first = await quotas.script(TAKE_PLACE_LUA)(
        keys=_keys(caller, queue, worker),
        args=[now, job.id, limit, now + lease, order_of(job), wait_end, ttl, caller, key_base(), slots, TURN_SCAN,
              TURN_YIELDS, "1" if room and slots else ""])
    return Turn(bool(taken), why, first)


async def refresh_place(job, worker: str = "") -> None:
    """The running job's place (and its slot of ``worker``) lasts another ``lease_ms()``."""
    lease = lease_ms()
    run_key, worker_key = share_keys(caller_of(job))[0], _keys("", "", worker)[6]
    await quotas.script(REFRESH_PLACE_LUA)(keys=[run_key, worker_key] if worker else [run_key],
                                           args=[job.id, _now_ms() + lease, lease + 60_000])


async def give_back(caller: str, job_id: str, next_anyway: bool = False, *, queue: str = "", worker: str = "",
                    limit: int = 0) -> str:
    """The job holds no place among its caller's running jobs (nor a slot of ``worker``) and
    waits for none now; the waiting job of ``queue`` whose turn it is (a caller's under
    ``limit``, 0: any) if this freed a place (or ``next_anyway``), else ''."""
    return await quotas.script(RELEASE_PLACE_LUA)(
        keys=_keys(caller, queue, worker),
        args=[job_id, _now_ms(), "1" if next_anyway else "", key_base(), limit, TURN_SCAN]) or ""


async def renew_wait(job, wait_seconds: float, queue: str = "") -> None:
    """The job's waiting entry lasts until ``wait_seconds`` (and the grace) from now."""
    end = _now_ms() + int((wait_seconds + WAIT_GRACE_SECONDS) * 1000)
    _run, _wait, wait_end, queued = _keys(caller_of(job), queue, "")[:4]
    async with async_redis().pipeline(transaction=False) as pipe:
        pipe.zadd(wait_end, {job.id: end}, xx=True)
        pipe.zadd(queued, {job.id: end}, xx=True)
        await pipe.execute()
