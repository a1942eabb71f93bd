"""What one process must tell the others, and what it keeps about its own work.

Theory of operation. Every process subscribes once to one control channel. A message names a
session (and a stream or request) and says what to do; each process acts on what it holds:

- ``cancel``: stop a running request (``notifications/cancelled`` landed somewhere else);
- ``takeover``: a client resumed a stream elsewhere, so connections still writing it here end
  (the newest resume wins: after a network switch the old TCP connection may look alive for
  minutes, and the client has moved on);
- ``closed``: the session was deleted or terminated, so its connections end and its requests stop;
- ``auth_forget``: a token was revoked or changed (auth/), so no process trusts its cached check.
- ``auth_created``: a token was created (auth/), so no process refuses it from a lookup before.
- ``permissions_changed``: a user's permissions, groups or flags changed (auth/permissions.py),
  so every process drops its copy of the user (the "session id" is the user's id, or ``*``).

What a module above this one keeps per process (auth's token cache, the sessions kept for a
quick resume) it drops through ``on_message()``: it registers when the app is ready (apps.py),
so that this module imports nothing above it.

A housekeeping task per process beats the heart of every request it runs, so that another
process can tell a request whose process died (an orphan) from a slow one, flushes
counters (metrics.py) in the same round trip, and offers to take the dashboard's sample
(samples.py).
"""
import asyncio
import json
import logging
import math
import secrets
import time
import weakref

import redis

from . import metrics, samples
from .bell import doorbell
from ..conf import get_config
from ..connections import async_redis, keys, publish as publish_on

logger = logging.getLogger(__name__)

#: (session id, JSON of the request id) -> (RequestStream, task) for requests running here.
running = {}
#: (session id, stream key) -> SseWriters of this process writing that stream.
writers = {}
_listening = weakref.WeakKeyDictionary()
_last_loop = type(None)  # () -> the loop ensure_listening() last subscribed, or None
#: kind -> what other modules do on a control message of that kind (``on_message``).
listeners = {}
#: What other modules do once this process subscribes, and again when it subscribes again after
#: losing the channel (messages sent meanwhile were missed): ``async hook()`` (``on_subscribed``).
subscribed_hooks = []


def request_key(request_id) -> str:
    return json.dumps(request_id)


def attach(writer) -> None:
    writers.setdefault((writer.session_id, writer.stream_key), set()).add(writer)


def detach(writer) -> None:
    held = writers.get((writer.session_id, writer.stream_key))
    if held is not None:
        held.discard(writer)
        if not held:
            del writers[(writer.session_id, writer.stream_key)]


def open_streams_by_session() -> dict:
    counts = {}
    for session_id, _stream in writers:
        counts[session_id] = counts.get(session_id, 0) + len(writers[(session_id, _stream)])
    return counts


def message(kind: str, session_id: str, **fields) -> str:
    """A control message, as ``handle()`` reads it."""
    return json.dumps({"kind": kind, "s": session_id, **fields})


def on_message(kind: str, listener) -> None:
    """Call ``listener(session_id)`` on every message of ``kind`` that reaches this process, after
    what ``handle()`` does itself (for ``auth_forget`` the "session id" is the token's digest)."""
    held = listeners.setdefault(kind, [])
    if listener not in held:
        held.append(listener)


def on_subscribed(hook) -> None:
    if hook not in subscribed_hooks:
        subscribed_hooks.append(hook)


async def _subscribed() -> None:
    for hook in subscribed_hooks:
        await hook()


async def publish(kind: str, session_id: str, **fields) -> None:
    await publish_on(async_redis(), keys().control_channel(), message(kind, session_id, **fields))


def listening() -> bool:
    """Whether this event loop listens already (``ensure_listening`` is then not needed):
    asked on every request, so the process's one loop is known without a weak dictionary."""
    loop = asyncio.get_running_loop()
    return _last_loop() is loop or loop in _listening


async def ensure_listening() -> None:
    """Subscribe this process (event loop) to the control channel and start housekeeping."""
    global _last_loop
    loop = asyncio.get_running_loop()
    if loop in _listening:
        return
    subscription = doorbell().listen(keys().control_channel())
    _listening[loop] = subscription
    _last_loop = weakref.ref(loop)
    await subscription.__aenter__()
    await _subscribed()
    loop.create_task(_listen(subscription))
    loop.create_task(_housekeeping())


async def _listen(subscription):
    while True:
        received = await subscription.wait(None)
        if received is not None and received[0] is None:  # (None, None): subscribed again
            asyncio.get_running_loop().create_task(_subscribed())
        elif received is not None:
            try:
                handle(json.loads(received[1]))
            except Exception:
                logger.exception("bad control message %r", received[1])


def handle(payload: dict) -> None:
    kind, session_id = payload["kind"], payload["s"]
    if kind == "cancel":
        cancel_local(session_id, payload.get("r"))
    elif kind == "takeover":
        for writer in list(writers.get((session_id, payload["k"]), ())):
            if writer.token != payload["t"]:
                writer.finish_with_retry()
    elif kind == "closed":
        cancel_local(session_id, None, (payload.get("why"), payload.get("by")))
        for (owner, _stream), held in list(writers.items()):
            for writer in list(held) if owner == session_id else ():
                writer.finish()
    for listener in listeners.get(kind, ()):
        listener(session_id)


def cancel_local(session_id: str, request_key_or_none, closed_by=None) -> None:
    """Stop the session's requests running here (all, or the one of ``request_key_or_none``).
    ``closed_by``: the session closed, (why, by whom) as its ``closed`` message says, which a
    background job that stops on it records (running/worker/run.py)."""
    for (owner, key), (stream, task) in list(running.items()):
        if owner == session_id and request_key_or_none in (None, key):
            stream.closed_by = closed_by
            stream.cancelled = True
            task.cancel()  # an async tool stops at its next await; a sync one sees ctx.cancelled


# -- liveness of running requests ------------------------------------------------------------

def heartbeat_seconds() -> float:
    return get_config()["HEARTBEAT_SECONDS"]


#: However short the heartbeat, a stall this long (a GC pause, a saturated machine) is not a death.
MIN_ORPHAN_AFTER_MS = 2000


def orphan_after_ms() -> int:
    """A request whose heart has not beaten for this long is taken for dead: three beats."""
    return max(int(heartbeat_seconds() * 3 * 1000), MIN_ORPHAN_AFTER_MS)


async def register_call(stream, **extra) -> None:
    """Record the request behind a stream, with a first heartbeat, for orphan recovery
    (``extra``: ``job=<id>`` for a background call, which running/jobs/settling.py watches
    instead)."""
    names = keys()
    record = names.call(stream.session_id, stream.stream_key)
    async with async_redis().pipeline(transaction=False) as pipe:
        pipe.hset(record, mapping={"id": json.dumps(stream.request_id), "beat": _now_ms(), **extra})
        pipe.expire(record, get_config()["STREAM_TTL"])
        await pipe.execute()
    stream.last_beat = time.monotonic()


def _call_fields(stream, now_ms: int) -> dict:
    fields = {"id": json.dumps(stream.request_id), "beat": now_ms}
    job = getattr(stream, "job", None)  # a worker's JobChannel
    if job is not None:
        fields["job"] = job.id
    return fields


async def _housekeeping():
    while True:
        await asyncio.sleep(heartbeat_seconds())
        try:
            await _timed_round()
            await samples.maybe_take()
        except Exception:
            logger.warning("housekeeping round failed; retrying", exc_info=True)


async def _beat_and_flush():
    names, now, ttl = keys(), _now_ms(), get_config()["STREAM_TTL"]
    streams = [stream for stream, _task in running.values() if stream.stream_key]
    async with async_redis().pipeline(transaction=False) as pipe:
        for stream in streams:
            # The whole record, not only the beat: a Redis that lost everything (restarted
            # empty) has it again at the next beat, with the request's id to answer an orphan
            # with, and a background job's id for running/jobs/settling.py.
            record = names.call(stream.session_id, stream.stream_key)
            pipe.hset(record, mapping=_call_fields(stream, now))
            pipe.expire(record, ttl)
        metrics.flush_into(pipe, open_streams_by_session())
        await pipe.execute()
    beaten = time.monotonic()
    for stream in streams:
        stream.last_beat = beaten


def _now_ms() -> int:
    return int(time.time() * 1000)


# A beat read back from Redis tells whether its process is alive only if Redis could take beats
# all along. During a stall (or a restart, a failover) nobody's beat gets through, and just
# after it every live process's last beat is as old as the stall until its next round lands:
# a process that read one then would take a live worker for lost. So each process times its
# own housekeeping rounds (they go to Redis every heartbeat anyway: no extra round trip), and
# reads others' beats only once its rounds have gone through on time for an orphan limit.

#: The event loop -> monotonic start of its housekeeping round in flight.
_rounds_in_flight = {}
#: Monotonic time from which beats read back say something again (after a slow or failed round).
_beats_readable_from = 0.0


def _slow_round_seconds() -> float:
    """A round blocked this long means beats were late by as much. Any stall long enough to age a
    live beat past the orphan limit (that limit less a heartbeat) blocks a round at least this
    long: a round starts within a heartbeat of the stall's start."""
    heartbeat = heartbeat_seconds()
    return max(heartbeat, orphan_after_ms() / 1000 - 2 * heartbeat)


async def _timed_round() -> None:
    global _beats_readable_from
    loop = asyncio.get_running_loop()
    started = _rounds_in_flight[loop] = time.monotonic()
    try:
        await _beat_and_flush()
    except redis.RedisError:
        _beats_readable_from = math.inf  # Redis is away (or refuses writes): until a round goes through
        raise
    finally:
        _rounds_in_flight.pop(loop, None)
    ended = time.monotonic()
    if ended - started > _slow_round_seconds() or _beats_readable_from == math.inf:
        # Live processes beat again within a heartbeat of Redis coming back: give them an
        # orphan limit to do it in before reading their beats.
        _beats_readable_from = ended + orphan_after_ms() / 1000


def beats_readable() -> bool:
    """Whether this process may take a beat older than the orphan limit for a death: False while
    its own housekeeping cannot reach Redis (or only slowly), and for an orphan limit after."""
    now = time.monotonic()
    if now < _beats_readable_from:
        return False
    return all(now - started <= _slow_round_seconds() for started in list(_rounds_in_flight.values()))


def looks_dead(call: dict) -> bool:
    """Whether the request behind a call record has missed its beats (``beat`` is the time of
    its process's last one)."""
    return beat_age_ms(call) >= orphan_after_ms() and beats_readable()


async def beat(session_id: str, stream_key: str) -> None:
    """One heartbeat now, for a request that starts running in this process (a job's worker)."""
    await async_redis().hset(keys().call(session_id, stream_key), "beat", _now_ms())


def beat_age_ms(call: dict) -> int:
    return _now_ms() - int(call["beat"])


async def read_call(session_id: str, stream_key: str) -> dict:
    return await async_redis().hgetall(keys().call(session_id, stream_key))


async def claim_orphan(session_id: str, stream_key: str, call=None):
    """If the request behind the stream lost its process, claim the right to answer it.

    Returns the request id to answer with an error, or None (alive, unknown, a background
    job, or claimed by someone else). The claim is HSETNX, so of several resuming processes
    exactly one answers.
    """
    client = async_redis()
    record = keys().call(session_id, stream_key)
    call = await client.hgetall(record) if call is None else call
    if not call or "done" in call or "job" in call or not looks_dead(call):
        return None
    if not await client.hsetnx(record, "done", "orphan"):
        return None
    return json.loads(call["id"])


async def claim_answer(stream) -> bool:
    """Before a slow request answers: if its heart may have looked dead (the process stalled
    for longer than the orphan limit), answer only if nobody answered for it meanwhile."""
    if time.monotonic() - stream.last_beat < orphan_after_ms() / 1000 * 0.9:
        return True
    record = keys().call(stream.session_id, stream.stream_key)
    return bool(await async_redis().hsetnx(record, "done", "answered"))


# -- who reads a stream ----------------------------------------------------------------------

_EXTEND = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0"
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"


class ReaderClaim:
    """The right to read a stream on one connection, across all processes.

    A plain GET of the standalone stream needs it free (else 409); a resume with Last-Event-ID
    takes it by force and tells the holder to stop (``takeover``)."""

    __slots__ = ("session_id", "stream_key", "key", "token", "ttl_ms")

    def __init__(self, session_id: str, stream_key: str):
        self.session_id, self.stream_key = session_id, stream_key
        self.key = keys().reader(session_id, stream_key)
        self.token = secrets.token_hex(8)
        self.ttl_ms = int(get_config()["KEEPALIVE_SECONDS"] * 3 * 1000)

    async def acquire(self) -> bool:
        """Take the stream if nobody reads it."""
        return bool(await async_redis().set(self.key, self.token, px=self.ttl_ms, nx=True))

    async def take_over(self) -> None:
        """Take the stream whoever reads it, and tell the reader to stop (one round trip)."""
        payload = json.dumps({"kind": "takeover", "s": self.session_id, "k": self.stream_key, "t": self.token})
        async with async_redis().pipeline(transaction=False) as pipe:
            pipe.set(self.key, self.token, px=self.ttl_ms)
            publish_on(pipe, keys().control_channel(), payload)
            await pipe.execute()

    async def extend(self) -> bool:
        """False once another connection has taken the stream over."""
        return bool(await async_redis().eval(_EXTEND, 1, self.key, self.token, self.ttl_ms))

    async def release(self) -> None:
        await async_redis().eval(_RELEASE, 1, self.key, self.token)
