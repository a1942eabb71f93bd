"""Sessions: a Django model row (the durable record) cached in Redis (the live copy).

Any web process serves any session. The Redis key expires after SESSION_IDLE_TIMEOUT without
a request (every request refreshes it with GETEX), which is how idle sessions expire. When the
key is missing but the row is open and recent (Redis was flushed or restarted), the row
refills it; otherwise the session is expired and its requests get 404:
"The server MAY terminate the session at any time, after which it MUST respond to requests
containing that session ID with HTTP 404 Not Found." -- spec 2025-11-25 basic/transports
"""
import asyncio
import json
import logging
import time
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Optional

from channels.db import database_sync_to_async
from django.utils import timezone

from . import control, metrics, quotas, rates, session_rows
from ..conf import get_config
from ..connections import async_redis, is_cluster, keys
from ..logs import client_value
from ..models import McpSession
from ..protocol.ids import GET_STREAM
from ..protocol.session import SessionState

logger = logging.getLogger(__name__)

#: Seconds between writes of ``last_seen_at`` to the database for one session.
LAST_SEEN_WRITE_INTERVAL = 60


@dataclass
class SessionRecord:
    id: str
    protocol_version: str
    state: str = SessionState.INITIALIZING.value
    client_info: dict = field(default_factory=dict)
    client_capabilities: dict = field(default_factory=dict)
    log_level: str = "info"
    user_id: Optional[int] = None
    #: The auth.Principal key the session belongs to ("" for anyone while auth is off).
    principal: str = ""
    #: The client address it counts against (MAX_SESSIONS_PER_ADDRESS; quotas.py).
    address: str = ""
    #: Unix time of the last database write of last_seen_at (not stored in the row).
    seen_written: float = 0.0
    #: Unix time it opened (its row's created_at, written once it did something: session_rows.py).
    created: float = 0.0

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: str) -> "SessionRecord":
        return cls(**json.loads(raw))

    @classmethod
    def from_row(cls, row: McpSession) -> "SessionRecord":
        return cls(id=row.id, protocol_version=row.protocol_version, state=row.state, client_info=row.client_info,
                   client_capabilities=row.client_capabilities, log_level=row.log_level, user_id=row.user_id,
                   principal=row.principal, seen_written=row.last_seen_at.timestamp(),
                   created=row.created_at.timestamp())


def _idle_timeout() -> int:
    return get_config()["SESSION_IDLE_TIMEOUT"]


async def _cache(record: SessionRecord) -> None:
    await async_redis().set(keys().session(record.id), record.to_json(), ex=_idle_timeout())


async def create(record: SessionRecord) -> None:
    """Open the session: its Redis copy serves from now on, written with its admission against
    its client address (MAX_SESSIONS_PER_ADDRESS; LimitReached, and nothing written, above it) in
    one round trip. It has no row yet: it gets one once it does something (``used``), so that a
    session opened and closed without a call costs the database nothing and leaves no row."""
    record.created = record.seen_written = time.time()
    if record.address:
        await quotas.admit_session(record.address, record.id, record.to_json(), _idle_timeout())
    else:
        await _cache(record)
    metrics.incr("sessions_created")
    logger.info("session opened by %s %s (protocol %s)", client_value(record.client_info.get("name", "?")),
                client_value(record.client_info.get("version", "?")), record.protocol_version,
                extra={"mcp_session_id": record.id})  # (the caller binds the session only once it is open)


def used(record: SessionRecord) -> None:
    """The session did something (a request after initialize, a GET stream): its row is written
    behind, unless it is there (``session_rows``: the admin lists it within moments, no request
    waits for the database), once per process; its row lost (a killed process never wrote it), it
    is written when the session is next used. A dict lookup on the request path."""
    session_rows.writer().used(record)


async def flush_rows() -> None:
    """Write the session rows this event loop still holds (a clean shutdown, a close)."""
    await session_rows.writer().flush()


#: Seconds a process takes the word of its own recent load of a session whose stream a client
#: resumes, and how many such sessions it keeps (the oldest go first).
RESUMABLE_FOR_SECONDS = 5
RESUMABLE_MAX = 20_000
_resumable = {}  # session id -> (SessionRecord, monotonic time it was loaded)


def remember_for_resume(record: SessionRecord) -> None:
    """Keep the session of a stream this process just opened: a client that drops it usually
    resumes within a few seconds, and its GET should not wait for a session round trip."""
    _resumable.pop(record.id, None)
    now = time.monotonic()
    _resumable[record.id] = (record, now)
    excess, stale = len(_resumable) - RESUMABLE_MAX, []
    for session_id, (_, loaded_at) in _resumable.items():  # oldest first
        if len(stale) >= excess and now - loaded_at <= RESUMABLE_FOR_SECONDS:
            break
        stale.append(session_id)
    for session_id in stale:
        del _resumable[session_id]


def forget(session_id: str) -> None:
    """The session closed (the ``closed`` control message reaches every process)."""
    _resumable.pop(session_id, None)
    session_rows.forget(session_id)


async def load_for_resume(session_id: str) -> Optional[SessionRecord]:
    """``load()``, or, within RESUMABLE_FOR_SECONDS of this process opening a stream of the
    session, the record it loaded then: a closed session is forgotten on the ``closed`` control
    message. The idle timer is not refreshed then; it was less than those seconds ago."""
    remembered = _resumable.get(session_id)
    if remembered is not None and time.monotonic() - remembered[1] <= RESUMABLE_FOR_SECONDS:
        return remembered[0]
    return await load(session_id)


async def load(session_id: str) -> Optional[SessionRecord]:
    """The open session with this id, refreshing its idle timer; None if unknown or closed."""
    raw = await async_redis().getex(keys().session(session_id), ex=_idle_timeout())
    return await _loaded(session_id, raw)


LOAD_FOR_CALL_LUA = rates.CHARGE_FUNCTION + """
-- KEYS[1]: the session's live copy, KEYS[2]: its running background calls (quotas.py), KEYS[3]
-- (a rate limited call): its caller's rate window. ARGV: the idle timeout (s), now (ms) (then the
-- rate's four, rates.Charge.args). The copy, its idle timer refreshed ('' when it is gone), how
-- many of the session's calls run in the background now (and the call's place in the window).
local raw = redis.call('GETEX', KEYS[1], 'EX', ARGV[1])
if not raw then return {'', 0} end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[2])
if KEYS[3] then return {raw, redis.call('ZCARD', KEYS[2]), charge_rate(KEYS[3], 3)} end
return {raw, redis.call('ZCARD', KEYS[2])}
"""


async def load_for_call(session_id: str, rate: Optional[rates.Charge] = None) -> tuple:
    """``load()`` for a request that counts as a call, and the count its admission needs
    (``quotas.admit_call``), in the same round trip: (record or None, running or None). With
    ``rate`` the call's place in its caller's rate window is taken too, if the session is there."""
    names, now = keys(), int(time.time() * 1000)
    script_keys, args = [names.session(session_id), names.calls(session_id)], [_idle_timeout(), now]
    if rates.uncounted(rate):
        script_keys.append(rate.key)
        args += rate.args(now)
    answer = await quotas.script(LOAD_FOR_CALL_LUA)(keys=script_keys, args=args)
    if not answer[0]:
        return await _loaded(session_id, None), None
    if len(answer) > 2:
        rate.took(answer[2])
    return await _loaded(session_id, answer[0]), answer[1]


READY_LUA = """
-- KEYS[1]: the session's live copy. ARGV: the idle timeout (s), the principal it must belong to.
-- The copy, its idle timer refreshed and, if it belongs to that principal and is initializing,
-- made ready in the same step (notifications/initialized: one round trip, not a read and a
-- write). The state is SessionRecord.to_json's third field, after two that cannot hold quotes
-- (the id, the version), so its first match is the field itself. Returns {copy or '', made ready}.
local raw = redis.call('GETEX', KEYS[1], 'EX', ARGV[1])
if not raw then return {'', 0} end
local ok, record = pcall(cjson.decode, raw)
if ok and type(record) == 'table' and record.principal == ARGV[2] and record.state == 'initializing' then
  local ready, found = string.gsub(raw, '"state":"initializing"', '"state":"ready"', 1)
  if found == 1 then
    redis.call('SET', KEYS[1], ready, 'KEEPTTL')
    return {ready, 1}
  end
end
return {raw, 0}
"""


async def load_initialized(session_id: str, principal: str) -> Optional[SessionRecord]:
    """``load()`` for ``notifications/initialized``: the session of ``principal`` that was
    initializing comes back ready, its copy changed in the same round trip, its row behind."""
    raw, made_ready = await quotas.script(READY_LUA)(keys=[keys().session(session_id)],
                                                     args=[_idle_timeout(), principal])
    record = await _loaded(session_id, raw or None)
    if made_ready and record is not None:
        session_rows.writer().change(record, ("state",))
    return record


async def _loaded(session_id, raw):
    if raw is not None:
        record = SessionRecord.from_json(raw)
        if time.time() - record.seen_written > LAST_SEEN_WRITE_INTERVAL:
            await _touch(record)
        return record
    return await _load_from_database(session_id)


async def _touch(record):
    record.seen_written = time.time()
    await _cache(record)
    await _extend_side_keys(record.id)
    session_rows.writer().change(record, ("seen_written",))


def side_key_ttl() -> int:
    """Lifetime of a session's other keys (subscriptions, outbound ids), renewed while it is used."""
    return _idle_timeout() + LAST_SEEN_WRITE_INTERVAL * 2


async def _extend_side_keys(session_id):
    names, client, ttl = keys(), async_redis(), side_key_ttl()
    uris = await client.smembers(names.subscriptions(session_id))
    async with client.pipeline(transaction=False) as pipe:
        pipe.expire(names.outbound_ids(session_id), ttl)
        pipe.expire(names.subscriptions(session_id), ttl)
        for uri in uris:
            pipe.expire(names.uri_subscribers(uri), ttl)
        await pipe.execute()


async def _load_from_database(session_id):
    if session_rows.writer().waiting(session_id):  # Redis lost it before its row was written
        await flush_rows()
    # A close writes its row behind: the marker it leaves first keeps the row, open for a few
    # moments more, from reopening the session.
    if await async_redis().exists(keys().closed(session_id)):
        return None
    row = await database_sync_to_async(McpSession.objects.filter(pk=session_id).first)()
    if row is None or not row.is_open:
        return None
    if timezone.now() - row.last_seen_at > timedelta(seconds=_idle_timeout()):
        await session_rows.writer().close([session_id], "expired")
        metrics.incr("sessions_closed:expired")
        logger.info("session closed: expired", extra={"mcp_session_id": session_id})
        return None
    record = SessionRecord.from_row(row)
    await _cache(record)  # Redis lost it (flush or restart); the row is authoritative
    return record


async def update(record: SessionRecord, **changes) -> None:
    """Change fields of the live copy; the row follows (``session_rows``)."""
    for name, value in changes.items():
        setattr(record, name, value)
    await _cache(record)
    session_rows.writer().change(record, changes)


#: What modules above this one do when sessions close (``on_close``).
_on_close = []


def on_close(hook) -> None:
    """Await ``hook(session_ids, reason, by)`` in ``close_many()``, before the sessions' keys go
    (in a client's DELETE, ``close_own()``, after them, and only if the close counted a call).
    Registered when the app is ready (apps.py): running/jobs/settling.py ends the sessions'
    background jobs (and the audit trail records who stopped them: ``by``)."""
    if hook not in _on_close:
        _on_close.append(hook)


#: Who closed a session: (principal key, client address); ("", "") for the server (its expiry).
SERVER = ("", "")


async def close(session_id: str, reason: str, by: tuple = SERVER) -> None:
    """Close the session everywhere: row, live copy, buffered events; every process ends its
    open streams and stops its running requests (the ``closed`` control message). ``by``: who
    closed it (a principal key and a client address)."""
    await close_many([session_id], reason, by)


async def close_own(session_id: str, principal: str, by: tuple) -> bool:
    """A client's DELETE: ``close()`` the session if it is open and ``principal``'s, checked by
    the close's own script (one round trip for both); False if it is not: to this principal it
    does not exist. Its row is written behind, and its jobs and events are asked about only if
    the close found any. It goes on if the client leaves meanwhile."""
    return await asyncio.shield(_close_own(session_id, principal, by))


async def _close_own(session_id, principal, by) -> bool:
    from ..storage import get_event_store

    (closed,) = await _close_keys([session_id], "deleted", by, owner=principal)
    if closed is None:
        return False
    _closed_here([session_id], "deleted")
    session_rows.writer().closing([session_id], "deleted")
    running, events, uris = closed
    if running:  # its background jobs end once its keys are gone: a job it still submits ends too
        await _end_jobs([session_id], "deleted", by)
    await _unsubscribe([session_id], [uris])
    if events:  # a DELETE of a session that never stored an event costs the store nothing
        await asyncio.shield(get_event_store().delete_sessions([session_id]))
    return True


async def close_many(session_ids: list, reason: str, by: tuple = SERVER) -> None:
    """``close()`` for many sessions at once: one UPDATE (awaited), one script call a session
    for the keys and the control messages, and the event store's deletions side by side (the
    cleanup's path). It goes on when the request that asked for it is cancelled (its client went
    away): else a session would stay counted against its address, its keys left behind."""
    await asyncio.shield(_close_many(session_ids, reason, by=by))


CLOSE_LUA = """
-- KEYS: the session's live copy, its GET stream's reader, outbound ids, subscriptions, running
-- calls, closed marker, and the event store's set of its streams. ARGV: session id, reason, the
-- marker's ttl (s), the control message, the prefix of address sets, now (ms), the control
-- channel; (a client's DELETE) the principal the session must belong to, else it returns nil
-- and changes nothing. Frees its place at its address at once, deletes its keys, marks it closed (before its
-- events go: an event a request still running appends after this is not stored, as the store's
-- append script and batch writer look for the marker) and tells every process. Returns how many
-- background calls it ran, whether it has stored events, and the URIs it subscribed to.
local raw = redis.call('GET', KEYS[1])
local record = nil
if raw then
  local ok, decoded = pcall(cjson.decode, raw)
  if ok and type(decoded) == 'table' then record = decoded end
end
if ARGV[8] then  -- a client's DELETE: only of an open session of its own, else nothing is done
  if not record or record.principal ~= ARGV[8] then return false end
end
if record and type(record.address) == 'string' and record.address ~= '' then
  redis.call('ZREM', ARGV[5] .. record.address, ARGV[1])
end
local uris = redis.call('SMEMBERS', KEYS[4])
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', ARGV[6])
local running = redis.call('ZCARD', KEYS[5])
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
redis.call('SET', KEYS[6], ARGV[2], 'EX', ARGV[3])
redis.call('PUBLISH', ARGV[7], ARGV[4])
return {running, redis.call('EXISTS', KEYS[7]), uris}
"""


def _close_script():
    # On a Cluster the control channel is a sharded one (connections.publish).
    return quotas.script(CLOSE_LUA.replace("redis.call('PUBLISH'", "redis.call('SPUBLISH'") if is_cluster()
                         else CLOSE_LUA)


async def _close_many(session_ids, reason, by=SERVER):
    """The cleanup's and the admin's close: the rows are written first, every session's jobs
    end before its keys go, and its events go."""
    from ..storage import get_event_store

    _closed_here(session_ids, reason)
    # After what waits for these rows, with the others closing meanwhile (one UPDATE).
    await session_rows.writer().close(session_ids, reason)
    await _end_jobs(session_ids, reason, by)
    closed = await _close_keys(session_ids, reason, by)
    await _unsubscribe(session_ids, [uris for _, _, uris in closed])
    await asyncio.shield(get_event_store().delete_sessions(session_ids))


def _closed_here(session_ids, reason) -> None:
    """What this process does of sessions that close: forgets them, logs and counts it."""
    for session_id in session_ids:
        forget(session_id)
        logger.info("session closed: %s", reason, extra={"mcp_session_id": session_id})
    metrics.incr(f"sessions_closed:{reason}", len(session_ids))


async def _end_jobs(session_ids, reason, by):
    # Background jobs end with their session (running/jobs/settling.py, through on_close): one
    # waiting for the gone client's answer, parked or in its worker slot, would otherwise hold on
    # until CLIENT_REQUEST_TIMEOUT.
    for hook in _on_close:
        await hook(session_ids, reason, by)


async def _close_keys(session_ids, reason, by=SERVER, owner=None) -> list:
    """One CLOSE_LUA call a session (pipelined, else side by side on a Cluster, whose pipelines
    refuse scripts): [(background calls, has events, subscribed URIs)] in ``session_ids`` order;
    ``owner``: only a session open and of that principal is closed (else None in its place)."""
    from ..storage import get_event_store

    names, store, script = keys(), get_event_store(), _close_script()
    ttl, now, channel = get_config()["STREAM_TTL"], int(time.time() * 1000), names.control_channel()
    owned = () if owner is None else (owner,)

    def call(session_id, client=None):
        return script(keys=[names.session(session_id), names.reader(session_id, GET_STREAM),
                            names.outbound_ids(session_id), names.subscriptions(session_id),
                            names.calls(session_id), names.closed(session_id),
                            # A store that cannot say whether the session has events: the
                            # marker, there by then, says it may.
                            store.sessions_events_key(session_id) or names.closed(session_id)],
                      # Why and by whom: a worker whose job stops on it records that (worker/run.py).
                      args=[session_id, reason, ttl, control.message("closed", session_id, why=reason, by=list(by)),
                            names.address_sessions(""), now, channel, *owned], client=client)

    if len(session_ids) == 1 or is_cluster():
        return await asyncio.gather(*(call(session_id) for session_id in session_ids))
    async with async_redis().pipeline(transaction=False) as pipe:
        for session_id in session_ids:
            await call(session_id, pipe)
        return await pipe.execute()


async def _unsubscribe(session_ids, subscribed):
    """Take the sessions out of the subscriber sets of the URIs they subscribed to (else every
    URI one ever subscribed to keeps its id until the set expires): no round trip for none."""
    names = keys()
    if not any(subscribed):
        return
    async with async_redis().pipeline(transaction=False) as pipe:
        for session_id, uris in zip(session_ids, subscribed):
            for uri in uris:
                pipe.srem(names.uri_subscribers(uri), session_id)
        await pipe.execute()
