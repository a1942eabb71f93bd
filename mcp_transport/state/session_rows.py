"""The sessions' rows, written in group commits on a thread of their own: the Redis copy serves.

A session's row is its durable record (it refills the Redis copy after a Redis restart, the
admin lists it), not what a request reads. A session has one once it did something: its first
request after ``initialize``, or its first GET stream, in each process hands its row over
(``RowWriter.used``), to be inserted unless it is there. So a session opened and deleted without
a call leaves no row (issue 38: anonymous open-and-DELETE churn left a closed row each, kept
``CLOSED_SESSION_RETENTION``, 7 days), and one whose row a killed process never wrote gets it when
it is next used (once per process: ``USED_REMEMBERED`` sessions a process remembers). Until then
its changes only update a row that is there. Written on the request path, the start of 1,000
sessions queued on the database's one writer (SQLite has one; issue 19 measured the first event
6-10 s after the request and 51 % of the server's samples in these two statements). So rows go
to this process's ``RowWriter``, which writes what waits in one transaction, at once after a quiet
spell and at most once a ``COMMIT_INTERVAL`` while rows keep coming (a group commit: a lone row
is written at once, a busy process's sessions a few times a second, many in each).
No request waits for these writes (issue 32): ``sessions.create``, ``sessions.update`` and a
client's DELETE hand their rows over and return; the admin lists a session within moments (the
writer starts at once), and a clean shutdown writes what waits (``transports/serving.py``). Only
``sessions.close_many`` (the cleanup, the admin's terminate) waits for the commit that closes its
rows.

Any process may write any session's row, so a write never assumes the row is there or not:
a new session's row is inserted unless it is there; a change is an upsert of the changed columns
(the row made from the whole record if another process's insert has not landed yet). A row the
database refuses for its data costs only itself; a failing database keeps the rows for a retry.
"""
import asyncio
import collections
import dataclasses
import logging
import weakref
from datetime import datetime, timedelta, timezone as dt_timezone

from django.db import connections, router, transaction

from . import histograms
from ..conf import get_config
from ..protocol.session import SessionState
from ..storage.persist import RETRY_DELAYS, RETRYABLE, EventTable

logger = logging.getLogger(__name__)

#: Record field -> the row's columns it is stored in.
COLUMNS = {
    "state": ("state",), "protocol_version": ("protocol_version",), "log_level": ("log_level",),
    "client_info": ("client_info", "client_name", "client_version"), "client_capabilities": ("client_capabilities",),
    "user_id": ("user_id",), "principal": ("principal",), "seen_written": ("last_seen_at",),
}
#: Seconds from one write's start to the next's: a busy process commits its sessions' rows a few
#: times a second, each transaction with all that came meanwhile (a commit per session kept
#: SQLite's one writer, and the server's core, busy: issue 32), and the admin lists a session
#: well within a second.
COMMIT_INTERVAL = 0.25
#: Sessions a process remembers having handed a row over for (``RowWriter.used``): one used
#: again after it forgot it (the least recently used first) costs another insert unless there.
USED_REMEMBERED = 100_000


def model():
    from ..models import McpSession

    return McpSession


def row_of(record):
    """The ``McpSession`` row of a ``sessions.SessionRecord``."""
    info = record.client_info
    return model()(
        id=record.id, user_id=record.user_id, principal=record.principal, state=record.state,
        protocol_version=record.protocol_version, client_name=str(info.get("name", ""))[:200],
        client_version=str(info.get("version", ""))[:100], client_info=info,
        client_capabilities=record.client_capabilities, log_level=record.log_level,
        created_at=datetime.fromtimestamp(record.created or record.seen_written, dt_timezone.utc),
        last_seen_at=datetime.fromtimestamp(record.seen_written, dt_timezone.utc))


@dataclasses.dataclass
class Pending:
    """A row to write: the record as it was last handed over, the fields changed since its last
    write, and whether the row is made from the record if it is not there (a session that did
    something here: ``RowWriter.used``), else only a row that is there is changed."""
    record: object
    changed: frozenset = frozenset()
    may_insert: bool = True

    def merge(self, newer: "Pending") -> "Pending":
        """This write and a newer one of the same session, as one write (of the newer record)."""
        return Pending(newer.record, self.changed | newer.changed, self.may_insert or newer.may_insert)


_used = collections.OrderedDict()  # session id -> None, least recently used first


class RowWriter:
    """The rows of one event loop waiting for the database, and the task that writes them."""

    def __init__(self, table: EventTable):
        self.table = table
        self._pending = {}  # session id -> Pending
        self._closing = {}  # reason -> the ids of the sessions closed for it
        self._task = None
        self._failures = 0
        self._writing = False
        #: The sessions of the batch being written: not written yet either.
        self._in_flight = frozenset()
        self._done = None  # a future resolved after each write
        self._last_write = float("-inf")  # loop time when the last write began

    def used(self, record) -> None:
        """The session did something here: its row is inserted unless it is there, the first
        time in this process (a dict lookup the other times)."""
        if record.id in _used:
            _used.move_to_end(record.id)
            return
        _used[record.id] = None
        if len(_used) > USED_REMEMBERED:
            _used.popitem(last=False)
        self._add(record.id, Pending(dataclasses.replace(record)))

    def change(self, record, fields) -> None:
        """The session's ``fields`` changed: written to its row, which is made from the record if
        the session did something here (else changed only if it is there)."""
        self._add(record.id, Pending(dataclasses.replace(record), frozenset(fields), record.id in _used))

    def _add(self, session_id, pending):
        earlier = self._pending.pop(session_id, None)
        self._pending[session_id] = earlier.merge(pending) if earlier else pending
        self._wake()

    def _wake(self):
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    def closing(self, session_ids, reason: str) -> None:
        """``close`` without waiting: the rows close with the next write (a client's DELETE)."""
        self._closing.setdefault(reason, set()).update(session_ids)
        self._wake()

    async def close(self, session_ids, reason: str) -> None:
        """Close the sessions' rows, after what waits for them here; returns once written. Many
        sessions closing at once (a client ending its thousand sessions) share an UPDATE."""
        self.closing(session_ids, reason)
        await self.flush()

    def waiting(self, session_id) -> bool:
        """Whether this session's row is not written yet (waiting, or in the batch being written)."""
        return session_id in self._pending or session_id in self._in_flight

    async def flush(self) -> None:
        """Return once every row handed over before this call is written (or refused)."""
        loop = asyncio.get_running_loop()
        while self._pending or self._closing or self._writing:
            if self._done is None:
                self._done = loop.create_future()
            done = self._done
            if (self._pending or self._closing) and (self._task is None or self._task.done()):
                self._task = loop.create_task(self._run())
            await asyncio.shield(done)

    async def _run(self):
        # Lives only while rows wait, so an idle loop holds no task of ours.
        try:
            while self._pending or self._closing:
                await self._pause()
                await self._write_waiting()
        except asyncio.CancelledError:
            await self._write_waiting()  # the loop is shutting down: write what waits first
            raise

    async def _pause(self):
        """Before a write: a failing database's retry delay; else what is left of COMMIT_INTERVAL
        since the last write began (a row after a quiet spell goes at once; rows that keep coming
        wait for one another)."""
        if self._failures:
            await asyncio.sleep(RETRY_DELAYS[min(self._failures, len(RETRY_DELAYS)) - 1])
            return
        left = self._last_write + COMMIT_INTERVAL - asyncio.get_running_loop().time()
        if left > 0:
            await asyncio.sleep(left)

    async def _write_waiting(self):
        batch, self._pending = self._pending, {}
        closing, self._closing = self._closing, {}
        retry, self._writing = [], True
        self._last_write = asyncio.get_running_loop().time()
        self._in_flight = frozenset(batch)
        try:
            retry = await self.table.run(write_batch, list(batch.values()), closing)
        except Exception:  # the thread itself failed (shut down): nothing was written
            logger.exception("%d session rows could not be written; Redis still has the sessions", len(batch))
        finally:
            self._writing = False
            self._in_flight = frozenset()
            self._failures = self._failures + 1 if retry else 0
            for pending in retry:  # before what came meanwhile, which is newer
                if isinstance(pending, Closing):
                    self._closing.setdefault(pending.reason, set()).update(pending.session_ids)
                    continue
                newer = self._pending.pop(pending.record.id, None)
                self._pending[pending.record.id] = pending.merge(newer) if newer else pending
            done, self._done = self._done, None
            if done is not None and not done.done():
                done.set_result(None)
        if retry:
            logger.warning("the database is failing; %d session rows wait for a retry (Redis serves the sessions)",
                           len(retry))


# -- on the writer's thread ---------------------------------------------------------------------

@dataclasses.dataclass
class Closing:
    """Sessions whose rows close for one reason (what waits for a retry)."""
    reason: str
    session_ids: set


def write_batch(batch: list, closing=None) -> list:
    """Write the rows, then close the ``closing`` ones ({reason: ids}), in one transaction; or
    each row alone if the database refuses one for its data (logged and skipped). Returns what
    waits for a retry (the database failed): ``Pending`` rows and ``Closing`` sessions."""
    closing = closing or {}
    try:
        _write(batch, closing)
        return []
    except RETRYABLE:
        return batch + [Closing(reason, ids) for reason, ids in closing.items()]
    except Exception:
        if len(batch) + bool(closing) <= 1:  # one row, or the closes alone: refused
            ids = [pending.record.id[:8] for pending in batch] or [i[:8] for ids in closing.values() for i in ids][:3]
            logger.exception("the database refused the session rows of %s…", ", ".join(ids))
            return []
    retry = []
    for pending in batch:
        retry += write_batch([pending])
    if closing:
        retry += write_batch([], closing)
    return retry


def _write(batch, closing):
    objects = model().objects
    using = router.db_for_write(model())
    new = [row_of(pending.record) for pending in batch if pending.may_insert and not pending.changed]
    upserts, updates = {}, {}
    for pending in batch:
        if pending.changed:
            columns = tuple(sorted({column for field in pending.changed for column in COLUMNS.get(field, ())}))
            (upserts if pending.may_insert else updates).setdefault(columns, []).append(pending.record)
    with transaction.atomic(using=using):
        if new:
            objects.bulk_create(new, ignore_conflicts=True)
        for columns, records in upserts.items():
            _upsert(objects, using, columns, records)
        for columns, records in updates.items():  # rows of sessions that did nothing here: if there
            if columns:
                objects.bulk_update([row_of(record) for record in records], list(columns))
        for reason, session_ids in closing.items():
            _close(objects, session_ids, reason)


def _close(objects, session_ids, reason):
    from django.utils import timezone

    closed, now = SessionState.CLOSED.value, timezone.now()
    objects.filter(pk__in=list(session_ids)).exclude(state=closed).update(
        state=closed, closed_at=now, closed_reason=reason)
    # The rows this UPDATE closed carry its closed_at (read after it, in its transaction: another
    # process closing one of them too finds it closed, or waits for this commit and then does),
    # so each closed session's duration is observed once, when the close is committed.
    ended = objects.filter(pk__in=list(session_ids), state=closed, closed_at=now, closed_reason=reason)
    durations = [_lasted(created, seen, now, reason)
                 for created, seen in ended.values_list("created_at", "last_seen_at")]
    if durations:
        transaction.on_commit(lambda: histograms.observe_sessions(durations), using=router.db_for_write(model()))


def _lasted(created, last_seen, closed, reason) -> float:
    """Seconds a session lasted as the server saw it: until its close, or for an expired one
    until its idle timeout ran out after its last request (``last_seen_at``, written at most
    every LAST_SEEN_WRITE_INTERVAL), which the cleanup may notice much later."""
    end = closed
    if reason == "expired":
        end = min(closed, last_seen + timedelta(seconds=get_config()["SESSION_IDLE_TIMEOUT"]))
    return max(0.0, (end - created).total_seconds())


def _upsert(objects, using, columns, records):
    if not columns:  # changes no column stores: the row alone, unless it is there
        objects.bulk_create([row_of(record) for record in records], ignore_conflicts=True)
        return
    target = {"unique_fields": ["id"]} if connections[using].features.supports_update_conflicts_with_target else {}
    objects.bulk_create([row_of(record) for record in records], update_conflicts=True, update_fields=list(columns),
                        **target)
    if "state" in columns:
        # A change that raced its session's close (in another process) must not reopen the row:
        # a closed row keeps its closed_at.
        closed = SessionState.CLOSED.value
        objects.filter(pk__in=[record.id for record in records], closed_at__isnull=False).exclude(
            state=closed).update(state=closed)


def forget(session_id) -> None:
    """The session closed: a later change only updates its row (``used`` need not remember it)."""
    _used.pop(session_id, None)


# -- one writer per event loop, one thread per process ----------------------------------------

_table = None
_writers = weakref.WeakKeyDictionary()


def writer() -> RowWriter:
    global _table
    loop = asyncio.get_running_loop()
    found = _writers.get(loop)
    if found is None:
        if _table is None:
            _table = EventTable(thread_name_prefix="mcp-sessions-db")
        found = _writers[loop] = RowWriter(_table)
    return found
