"""The durable record of events: rows of ``models.StoredEvent``, written and read off the loop.

Every store that uses the database gets one ``EventTable``: a thread of its own that runs its
ORM calls one at a time, so the event loop never waits on the database, Django's shared sync
thread (sessions, the admin) never waits on event writes, and SQLite never sees two writers of
ours at once. ``Flusher`` batches rows per event loop: appends hand it rows and return at once;
it bulk-inserts them every ``interval`` seconds or ``max_rows`` rows, whichever comes first.

*One row never costs another* (``write_rows``). A batch carries rows of many sessions, so a row
the database refuses must not fail the rest: a batch that fails for a reason tied to its data
(``DataError``, ``IntegrityError``, a value the driver cannot encode) is split in halves until
the refused rows are alone; those are dropped from the durable record, counted
(``events_write_dropped``) and logged in one line per batch. A failure of the database itself
(``OperationalError``, ``InterfaceError``: down, restarting, locked) is retryable: the rows stay
queued and are written again after a back-off, while Redis keeps serving them.

*No event leaves Redis before its row is written* ("keep the Redis copy until its row is safe",
issue 10): ``Flusher.admit`` holds an append back while its stream already has ``maxlen`` events
unwritten, or its session ``session_max_events`` events or ``session_max_bytes`` bytes (the
limits past which the Redis store trims or evicts), so what Redis trims has been written. The
backlog is counted per stream and session, and the wait happens before the append joins a
shared script call, so one session's backlog (a database outage, a flood) holds back that
session's appends only. The wait is bounded (``unwritten_wait``): see ``Flusher.admit``.
"""
import asyncio
import logging
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor

from django.db import InterfaceError, OperationalError, close_old_connections, connections, router, transaction
from django.db.models import Count, Q
from django.db.models.constants import OnConflict
from django.utils import timezone

from ..fields import wrap_json
from ..protocol.ids import EventId
from .base import StoredEvent, position_key

logger = logging.getLogger(__name__)

#: ``persist`` option values of the Redis store.
PERSIST_MODES = ("batched", "write_through", "off")
#: Failures of the database rather than of the rows: written again later.
RETRYABLE = (OperationalError, InterfaceError)
#: Seconds between attempts at rows whose write failed retryably (doubling up to the last).
RETRY_DELAYS = (0.5, 1.0, 2.0, 5.0)


def all_rows():
    """``StoredEvent.objects``, imported late: models need the app registry."""
    from ..models import StoredEvent as EventRow

    return EventRow.objects


class EventTable:
    """Runs ORM functions on this store's own thread, one at a time."""

    def __init__(self, thread_name_prefix="mcp-events-db"):
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=thread_name_prefix)

    async def run(self, function, *args):
        return await asyncio.get_running_loop().run_in_executor(self._executor, _call, function, args)

    def close(self) -> None:
        """Close this thread's database connections and stop the thread (tests, shutdown)."""
        self._executor.submit(connections.close_all).result()
        self._executor.shutdown(wait=True)


def _call(function, args):
    # As channels' database_sync_to_async: drop connections that are stale or broken, before
    # and after, since no request cycle does it on this thread.
    close_old_connections()
    try:
        return function(*args)
    finally:
        close_old_connections()


class Flusher:
    """Rows waiting for the database, written in bulk off the loop. One per event loop.

    With ``max_unwritten``, ``make_room`` holds appends back while that many rows are not in the
    database yet (waiting, being written, or waiting for a retry). ``limits`` (a ``Backlog``)
    bounds the unwritten events of each stream and session (``admit``). ``counters`` (a
    ``signals.RedisCounters``) counts the rows the database refused. ``closed_sessions(ids)``
    (async) says which sessions closed: their rows written meanwhile are deleted again."""

    def __init__(self, table: EventTable, interval: float, max_rows: int, max_unwritten=None, counters=None,
                 closed_sessions=None, limits=None):
        self.table, self.interval, self.max_rows = table, interval, max_rows
        self.max_unwritten, self.counters, self.closed_sessions = max_unwritten, counters, closed_sessions
        self.limits = limits
        self._rows = []
        self._writing = 0
        self._failures = 0  # consecutive retryable failures: the back-off's index
        self._full = asyncio.Event()
        self._task = None
        self._written = None
        #: Unwritten events admitted, by ("stream", session, stream), ("session", session) and
        #: bytes by ("bytes", session); zero entries are deleted.
        self._held = Counter()
        #: Since when (loop time) each session's appends wait for the database.
        self._waiting_since = {}
        #: The appends of each session waiting in ``admit``, in call order (one object each).
        self._queued = {}

    def unwritten(self) -> int:
        return len(self._rows) + self._writing

    async def make_room(self, count: int) -> None:
        """Wait until ``count`` more rows keep at most ``max_unwritten`` rows unwritten (a batch
        bigger than that alone waits only for the rows before it)."""
        while self.max_unwritten is not None and self.unwritten() and self.unwritten() + count > self.max_unwritten:
            self._full.set()
            if self._written is None:
                self._written = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._written)

    # -- the backlog of each stream and session --------------------------------------------

    async def admit(self, session_id: str, stream_key: str, size: int) -> None:
        """Count one event of ``size`` bytes as unwritten, once its stream and session have
        room for it (``Backlog``); ``release`` it when its row is written, refused or dropped.

        When they have none, the database is behind (an outage: rows wait for a retry), and
        the issue asks to "keep the Redis copy until its row is safe". So the append waits for
        the rows before it to be written, but for ``limits.wait`` seconds at most in all per
        stall of the session: an unbounded wait would hold the session's requests (their call
        slots, a sync tool's thread) for as long as the outage lasts, so the web process keeps
        them bounded. Past that, appends go on and Redis may trim events whose rows still wait:
        they are not lost (they stay queued here and are written when the database is back),
        but a client more than a ring behind cannot read them until then. Counted as
        ``events_unwritten_overrun``. Other sessions never wait for this one.

        A session's appends pass in call order: one that finds others of its session waiting
        queues behind them even when there is room, or it would reach Redis before them (a sync
        tool's reports are appended without waiting for each other, running/worker/context.py:
        the stream would carry them out of order)."""
        if session_id not in self._queued and not self._no_room(session_id, stream_key, size):
            self._waiting_since.pop(session_id, None)
            self._hold(session_id, stream_key, size, 1)
            return
        queue, turn = self._queued.setdefault(session_id, deque()), [stream_key, size]  # a list: one per append
        queue.append(turn)
        found_room = False
        try:
            found_room = await self._wait_for_room(session_id, stream_key, size, queue, turn)
            self._hold(session_id, stream_key, size, 1)
        finally:
            queue.remove(turn)
            if not queue:
                del self._queued[session_id]
            elif not found_room or not self._no_room(session_id, *queue[0]):
                self._wake()  # the next in line can pass now (or overrun, or it is cancelled)

    async def _wait_for_room(self, session_id, stream_key, size, queue, turn) -> bool:
        """Wait until it is this append's turn and there is room (True), or the stall overran."""
        loop = asyncio.get_running_loop()
        while queue[0] is not turn or self._no_room(session_id, stream_key, size):
            since = self._waiting_since.setdefault(session_id, loop.time())
            left = since + self.limits.wait - loop.time()
            if left <= 0 and queue[0] is turn:
                self._overrun(session_id)
                return False
            self._full.set()  # write now, do not wait for the interval
            if self._written is None:
                self._written = loop.create_future()
            try:
                await asyncio.wait_for(asyncio.shield(self._written), left if left > 0 else None)
            except asyncio.TimeoutError:
                pass
        self._waiting_since.pop(session_id, None)
        return True

    def _no_room(self, session_id, stream_key, size) -> bool:
        """Whether one more event would take the stream or the session past its limit (an
        event alone larger than a limit waits only for the ones before it)."""
        limits, held = self.limits, self._held
        if limits is None:
            return False
        in_stream, in_session = held["stream", session_id, stream_key], held["session", session_id]
        kept_bytes = held["bytes", session_id]
        return ((in_stream and in_stream + 1 > limits.stream) or (in_session and in_session + 1 > limits.session)
                or (limits.session_bytes is not None and kept_bytes and kept_bytes + size > limits.session_bytes))

    def _overrun(self, session_id):
        if self.counters is not None:
            self.counters.add_soon({"events_unwritten_overrun": 1})
        logger.warning("session %s… has waited %.0f s for the database: its events go on, and Redis may trim some "
                       "whose rows still wait for a retry", session_id[:8], self.limits.wait)

    def _hold(self, session_id, stream_key, size, sign):
        if self.limits is None:
            return
        for key, amount in ((("stream", session_id, stream_key), 1), (("session", session_id), 1),
                            (("bytes", session_id), size)):
            self._held[key] += sign * amount
            if self._held[key] <= 0:
                del self._held[key]
        if ("session", session_id) not in self._held:  # its stall, if any, is over
            self._waiting_since.pop(session_id, None)

    def release(self, rows) -> None:
        """The rows' events are no longer unwritten (written, refused, dropped, never added)."""
        for session_id, stream_key, _, data, _ in rows:
            self._hold(session_id, stream_key, len(data), -1)
        if rows:
            self._wake()

    def _wake(self):
        written, self._written = self._written, None
        if written is not None and not written.done():
            written.set_result(None)

    # -- rows ------------------------------------------------------------------------------

    def add(self, rows: list) -> None:
        self._rows.extend(rows)
        if len(self._rows) >= self.max_rows:
            self._full.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self):
        # Lives only while rows wait, so an idle loop holds no task of ours.
        try:
            while self._rows:
                await self._wait()
                await self.flush()
        except asyncio.CancelledError:
            # The loop is shutting down (asyncio.run and async_to_sync cancel what is left, as
            # in a Celery task or a sync view): write what waits before it goes.
            await self.flush()
            raise

    async def _wait(self):
        if self._failures:  # the database is failing: a full batch must not hurry the retry
            await asyncio.sleep(RETRY_DELAYS[min(self._failures, len(RETRY_DELAYS)) - 1])
            return
        try:
            await asyncio.wait_for(self._full.wait(), self.interval)
        except asyncio.TimeoutError:
            pass

    async def flush(self) -> None:
        """Write every waiting row now; returns once they (and any earlier batch) are written,
        refused, or queued again for a retry."""
        self._full.clear()
        rows, self._rows = self._rows, []
        self._writing += len(rows)
        retry = []
        try:
            retry, refused = await self.table.run(write_rows, rows)
            self._failures = self._failures + 1 if retry else 0
            if retry:
                logger.warning("the database is failing; %d events wait for a retry (Redis has them)", len(retry))
            self.count_refused(refused)
        except Exception:  # the table's thread itself failed (shut down): nothing was written
            logger.exception("%d events could not be written to the database; Redis still has them", len(rows))
        else:
            try:
                await self.forget_closed(rows)
            except Exception:  # Redis is failing: the cleanup's retention deletes such rows later
                logger.warning("checking for sessions closed during a write failed", exc_info=True)
        finally:
            self._writing -= len(rows)
            self._rows[:0] = retry  # before anything added meanwhile: positions stay in order
            waiting = {id(row) for row in retry}
            self.release([row for row in rows if id(row) not in waiting])
            self._wake()

    async def forget_closed(self, rows) -> None:
        """A session closed while its rows waited here or were being written: its DELETE
        already deleted what the database had, so these rows go too. Checked after the write,
        an order in which no row can slip between the two deletes (the close marks the session
        before it deletes)."""
        if self.closed_sessions is None or not rows:
            return
        closed = await self.closed_sessions({row[0] for row in rows})
        if closed:
            await self.table.run(delete_sessions_rows, closed)

    def count_refused(self, refused) -> None:
        """Log and count rows the database refused (``write_rows``), in one line."""
        if not refused:
            return
        (session_id, stream_key, position, _, _), error = refused[0]
        logger.error("%d events were refused by the database and are not in its record (Redis keeps its copy "
                     "until it expires); the first: session %s… stream %s position %s: %s", len(refused),
                     session_id[:8], stream_key, position, _one_line(error))
        if self.counters is not None:
            self.counters.add_soon({"events_write_dropped": len(refused)})

    def drop_session(self, session_id: str) -> None:
        dropped = [row for row in self._rows if row[0] == session_id]
        self._rows = [row for row in self._rows if row[0] != session_id]
        self.release(dropped)


class Backlog:
    """How many unwritten events a stream (``stream``) and a session (``session`` events,
    ``session_bytes`` bytes, None: no byte limit) may have, and the longest an append waits for
    room (``wait`` seconds per stall of its session)."""

    def __init__(self, stream: int, session: int, session_bytes, wait: float):
        self.stream, self.session, self.session_bytes, self.wait = stream, session, session_bytes, wait


def _one_line(error) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"


# -- ORM functions: they run on an EventTable's thread ------------------------------------------

def write_rows(rows: list) -> tuple:
    """Insert rows so that none costs another: ``(rows to retry, [(row, error) refused])``.

    A batch refused for its data is split in halves until each refused row is alone (a few
    transactions for one bad row among hundreds); once the database itself fails, the rows not
    written yet are all returned for a retry."""
    retry, refused, pending = [], [], [rows]
    while pending:
        batch = pending.pop()
        if retry:
            retry.extend(batch)
            continue
        try:
            insert_rows(batch)
        except RETRYABLE:
            retry = list(batch)
        except Exception as exc:  # DataError, IntegrityError, ValueError from the driver, ...
            if len(batch) == 1:
                refused.append((batch[0], exc))
            else:
                middle = len(batch) // 2
                pending += [batch[middle:], batch[:middle]]  # the first half is written first
    return retry, refused


def insert_rows(rows: list) -> None:
    """Insert (session, stream, position, message as UTF-8 JSON or b"", final) rows in one
    transaction; rows already there are skipped.

    Plain ``executemany`` with the JSON the Redis store already encoded, not ``bulk_create``:
    building model instances costs ~10x more Python time, and this thread shares the GIL with
    the event loop (bench/RESULTS.md, "Event store")."""
    if not rows:
        return
    model = all_rows().model
    connection = connections[router.db_for_write(model)]
    created = connection.ops.adapt_datetimefield_value(timezone.now())
    params = [(session_id, stream_key, position, *position_key(position),
               wrap_json(message.decode()) if message else None, final, len(message), created)
              for session_id, stream_key, position, message, final in rows]
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        cursor.executemany(_insert_sql(connection, model), params)


def _insert_sql(connection, model) -> str:
    """INSERT ... that skips rows whose (session, stream, position) exists, in this vendor's SQL."""
    names = ("session_id", "stream", "position", "position_ms", "position_seq", "message", "final", "size",
             "created_at")
    columns = ", ".join(connection.ops.quote_name(model._meta.get_field(name).column) for name in names)
    json = "%s::jsonb" if connection.vendor == "postgresql" else "%s"
    values = ", ".join(json if name == "message" else "%s" for name in names)
    return (f"{connection.ops.insert_statement(on_conflict=OnConflict.IGNORE)} "
            f"{connection.ops.quote_name(model._meta.db_table)} ({columns}) VALUES ({values}) "
            f"{connection.ops.on_conflict_suffix_sql(None, OnConflict.IGNORE, None, None)}")


def insert_row(session_id, stream_key, position, message, final, size) -> None:
    """Insert one row (``message`` a dict or None, ``size`` its bytes as compact JSON);
    IntegrityError when the position is taken."""
    ms, seq = position_key(position)
    all_rows().create(session_id=session_id, stream=stream_key, position=position, position_ms=ms,
                      position_seq=seq, message=message, final=final, size=size)


def stream_rows(session_id: str, stream_key: str):
    return all_rows().filter(session_id=session_id, stream=stream_key)


def after(rows, position: str):
    ms, seq = position_key(position)
    return rows.filter(Q(position_ms__gt=ms) | Q(position_ms=ms, position_seq__gt=seq))


def events(rows, stream_key: str) -> list:
    ordered = rows.order_by("position_ms", "position_seq").values_list("position", "message", "final")
    return [StoredEvent(EventId(stream_key, position), message, final) for position, message, final in ordered]


def before(rows, position: str):
    ms, seq = position_key(position)
    return rows.filter(Q(position_ms__lt=ms) | Q(position_ms=ms, position_seq__lt=seq))


def numbered_rows(rows, stream_key: str, first: dict, start: int):
    """(how many, the entries from index ``start - 1`` on) of a stream's ``rows``, numbered from
    its first, which must hold ``first`` (else None): two queries that read what they return
    (an index's count, then the last rows), not the rows before them."""
    ordered = rows.order_by("position_ms", "position_seq")
    if ordered.values_list("message", flat=True).first() != first:
        return None
    count = rows.count()
    wanted = count - max(start - 1, 0)
    if wanted <= 0:
        return count, []
    newest = rows.order_by("-position_ms", "-position_seq").values_list("position", "message", "final")[:wanted]
    return count, [StoredEvent(EventId(stream_key, position), message, final)
                   for position, message, final in reversed(newest)]


def rows_after(session_id: str, stream_key: str, position: str) -> list:
    return events(after(stream_rows(session_id, stream_key), position), stream_key)


def replay_rows(session_id: str, stream_key: str, position: str):
    """The events after ``position``, or None when the database has no such event."""
    rows = stream_rows(session_id, stream_key)
    if not rows.filter(position=position).exists():
        return None
    return events(after(rows, position), stream_key)


def oldest_position(rows):
    """The first position of a stream's rows, or None when it has none."""
    return rows.order_by("position_ms", "position_seq").values_list("position", flat=True).first()


def stream_counts(session_ids) -> dict:
    """``{session id: {stream key: rows}}`` of these sessions, in one query."""
    found = {session_id: {} for session_id in session_ids}
    rows = all_rows().filter(session_id__in=list(session_ids)).values_list("session_id", "stream")
    for session_id, stream_key, events in rows.annotate(events=Count("pk")).order_by():
        found[session_id][stream_key] = events
    return found


def delete_sessions_rows(session_ids: list) -> int:
    return all_rows().filter(session_id__in=session_ids).delete()[0]
