"""The log of recent calls (``models.McpCall``), both eras, written in batches off the request path:
an operator's view of the traffic, and the audit trail of every call that changes state.

``finished()`` is called once per request where it is finished (its answer is written, or its
work handed to a background job), by the request pipeline alone (pipeline.py: ``record``), in
both eras and on every transport (with no answer when its client left before it), and counted in
the operation duration histogram (state/histograms.py). It hands
``add()`` what it knows (a tuple of references) and returns at once: no database write, no
Redis round trip and no serializing on the hot path. The captured calls wait in the process,
and a task of the loop makes their rows and bulk-inserts them every ``INTERVAL`` seconds or
``BATCH`` rows, on a thread of their own (as the event rows' ``persist.EventTable``), so the
loop never waits on the database.

A call that changes state (audit.py: a tool not marked read-only, a write of a toolset or an
admin action, a job's cancel) is recorded always, with its principal (else its client address),
its target, its redacted arguments and its outcome, and its row is in the database before its
answer goes out (``trail``: the request waits for it, and ``finished`` returns what to wait
for): a client never learns of a change the audit trail does not hold, though the process be
killed the next moment (issue 38: a SIGKILL right after 100 sessions each made one such call left
0 of their 100 rows, which waited for the next batch). So does a job's stop (``job_stopped``:
who stopped it, and how). Only the other calls are sampled
(``CALL_LOG_SAMPLE``) and capped: at most ``CALL_LOG_MAX_PER_SECOND`` rows per second per caller
(its principal, else its client address) in a process, for calls answered ok and again for the
rest, the calls past it counted as ``calls_log_skipped``; so one caller's flood spends its own
share only, and hides neither another's calls nor any write. The process counts the callers it
saw last (``CALLERS_REMEMBERED``, least recently seen forgotten first).

The audit trail's rows go in group commits (``Trail``): those handed over while a write runs go
together in the next, so a busy process pays an INSERT a batch, not a call, and none waits for a
timer; a thread of their own writes them, so none waits behind a batch of sampled rows. A database
that fails the write (down, out of connections, locked past its timeout) does not hold the
answers: the rows join the backlog below, which keeps them last to drop, and the answers go out.

At most ``MAX_WAITING`` rows wait (a database outage): past that a read-only call's new row is
dropped, and a state-changing call's takes the place of the oldest read-only row waiting; only
when every waiting row is a state-changing call's is a new one dropped (``calls_log_dropped``
counts every dropped row, ``calls_log_writes_dropped`` those, and the writer's warning says so).
Rows a failed write could not store go back first in line, the read-only ones dropped first if
they no longer fit. The cleanup deletes rows older than ``CALL_LOG_RETENTION``.
"""
import asyncio
import json
import logging
import random
import time
import weakref
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone as dt_timezone
from typing import Optional

from django.db import InterfaceError, OperationalError, close_old_connections

from .. import tracing
from . import audit
from ..conf import get_config
from ..models import McpCall
from ..methods import dispatch
from ..protocol import jsonrpc
from ..state import histograms, metrics

logger = logging.getLogger(__name__)

#: Seconds between writes, rows per write, and the most rows that may wait.
INTERVAL = 1.0
BATCH = 500
MAX_WAITING = 10_000
#: Callers whose rows of this second a process counts (the least recently seen forgotten first).
CALLERS_REMEMBERED = 10_000

_waiting: list = []
#: The rows of ``_waiting`` before this index are all state-changing calls' (where a full
#: backlog looks for a read-only row to drop).
_writes_before = 0
#: State-changing rows dropped since the writer last warned.
_writes_lost = 0
_full = None
_task = None
_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-calls-db")
#: The audit trail's writes (``Trail``): a thread of their own, never behind a batch of samples.
_trail_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-audit-db")


def add(captured: tuple) -> None:
    """Queue one call for the next batch (call it on the event loop)."""
    global _task, _full
    if len(_waiting) >= MAX_WAITING and not _make_room(_changes_state(captured)):
        return
    _waiting.append(captured)
    loop = asyncio.get_running_loop()
    if _task is None or _task.done() or _task.get_loop() is not loop:
        _full = asyncio.Event()
        _task = loop.create_task(_run())
    if len(_waiting) >= BATCH:
        _full.set()


def _changes_state(captured) -> bool:
    """A captured call's last item says whether it changes state (a job's stop is a row's fields)."""
    if type(captured) is dict:
        return captured.get("changes_state") is True
    return type(captured) is tuple and len(captured) > 0 and captured[-1] is True


def _make_room(writes: bool) -> bool:
    """The backlog is full: True if a state-changing call's row may go in, in the place of the
    oldest read-only row waiting (dropped); a read-only call's row is dropped, and so is a
    state-changing one's when every waiting row is a state-changing call's."""
    global _writes_before, _writes_lost
    metrics.incr("calls_log_dropped")
    if writes:
        for index in range(_writes_before, len(_waiting)):
            if not _changes_state(_waiting[index]):
                del _waiting[index]
                _writes_before = index
                return True
        _writes_before = len(_waiting)
        _writes_lost += 1
        metrics.incr("calls_log_writes_dropped")
    return False


async def _run():
    # Lives only while rows wait, so an idle loop holds no task of ours.
    try:
        while _waiting:
            try:
                await asyncio.wait_for(_full.wait(), INTERVAL)
            except asyncio.TimeoutError:
                pass
            await flush()
    except asyncio.CancelledError:
        await flush()  # the loop is shutting down: write what waits
        raise


async def flush() -> None:
    """Write every waiting row now (tests, shutdown)."""
    global _writes_before
    await trail().idle()
    if _full is not None:
        _full.clear()
    _report_lost_writes()
    rows = _waiting[:]
    del _waiting[:]
    _writes_before = 0
    loop = asyncio.get_running_loop()
    for start in range(0, len(rows), BATCH):
        batch = rows[start:start + BATCH]
        try:
            await loop.run_in_executor(_executor, _write, batch)
        except (OperationalError, InterfaceError):
            # The database is away (down, or out of connections): keep the rows for the next
            # write, in order, within MAX_WAITING; before, the whole batch was lost at once.
            _requeue(rows[start:])
            return
        except Exception:
            # The database refused a row and would refuse it again: kept, it would stall the log
            # for every client. The others go in one by one.
            logger.warning("a call log batch was refused; writing its rows one by one", exc_info=True)
            await loop.run_in_executor(_executor, _write_one_by_one, batch)


def _requeue(unwritten: list) -> None:
    """Put the rows a failed write could not store back first in line, within MAX_WAITING: the
    oldest read-only rows go first, then the newest state-changing ones."""
    global _writes_before, _writes_lost
    rows = unwritten + _waiting
    excess = len(rows) - MAX_WAITING
    if excess > 0:
        reads = [index for index, row in enumerate(rows) if not _changes_state(row)]
        dropped = set(reads[:excess])
        rows = [row for index, row in enumerate(rows) if index not in dropped]
        lost = max(0, len(rows) - MAX_WAITING)
        del rows[MAX_WAITING:]
        metrics.incr("calls_log_dropped", excess)
        if lost:
            _writes_lost += lost
            metrics.incr("calls_log_writes_dropped", lost)
    _waiting[:] = rows
    _writes_before = 0
    logger.warning("%d call log rows (%d of state-changing calls) could not be written yet", len(unwritten),
                   sum(map(_changes_state, rows)), exc_info=True)


def _report_lost_writes() -> None:
    """An ERROR for the state-changing rows dropped since the last one (at most one a flush)."""
    global _writes_lost
    if _writes_lost:
        logger.error("%d rows of state-changing calls were not recorded: the calls log's backlog was full of "
                     "them (MAX_WAITING) while the database refused its writes", _writes_lost)
        _writes_lost = 0


def _write_one_by_one(rows) -> None:
    for row in rows:
        try:
            _write([row])
        except Exception:
            logger.warning("a call log row was refused", exc_info=True)
            metrics.incr("calls_log_dropped")


def _write(rows) -> None:
    close_old_connections()
    try:
        McpCall.objects.bulk_create([row for row in map(_model_row, rows) if row is not None])
    finally:
        close_old_connections()


def _model_row(captured):
    try:
        return McpCall(**(captured if type(captured) is dict else _row(captured)))
    except Exception:  # one odd call must not cost the batch
        logger.warning("a call log row could not be made", exc_info=True)
        return None


# -- the audit trail: rows in the database before the answer --------------------------------

class Trail:
    """The audit trail's rows of one event loop, written in group commits: ``write`` returns
    once its row is committed (or, the database failing, in the backlog)."""

    def __init__(self):
        self._rows = []  # (captured, future)
        self._task = None

    def write(self, captured) -> asyncio.Future:
        """A future that is done once the row is written: True, or False if it went to the backlog."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self._rows.append((captured, done))
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run())
        return done

    async def idle(self) -> None:
        """Return once every row handed over is written (a clean shutdown)."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)

    async def _run(self):
        # Lives only while rows wait; the rows that come during a write go in the next.
        while self._rows:
            batch, self._rows, written = self._rows, [], False
            try:
                written = await self._commit([captured for captured, _ in batch])
            finally:  # however it went (even cancelled: the loop is closing), no answer waits for ever
                for _captured, done in batch:
                    if not done.done():  # its request may have been cancelled meanwhile
                        done.set_result(written)

    @staticmethod
    async def _commit(rows) -> bool:
        loop = asyncio.get_running_loop()
        try:
            try:
                await loop.run_in_executor(_trail_executor, _write, rows)
            except (OperationalError, InterfaceError):
                raise
            except Exception:
                logger.warning("an audit trail batch was refused; writing its rows one by one", exc_info=True)
                await loop.run_in_executor(_trail_executor, _write_one_by_one, rows)
            return True
        except Exception:  # the database is away (or the writer's thread is gone: shutting down)
            logger.warning("%d rows of the audit trail wait in the calls log's backlog: they could not be written "
                           "now", len(rows), exc_info=True)
            for captured in rows:
                add(captured)
            return False


_trails = weakref.WeakKeyDictionary()


def trail() -> Trail:
    """This event loop's ``Trail``."""
    loop = asyncio.get_running_loop()
    found = _trails.get(loop)
    if found is None:
        found = _trails[loop] = Trail()
    return found


@dataclass(frozen=True)
class Stop:
    """Who stopped a background job, and how: its row in the audit trail (``job_stopped``)."""
    #: How: "notifications/cancelled", "disconnect" (a 2026-07-28 client closed its call),
    #: "session deleted" / "session terminated" / "session expired", "admin: cancel" ...
    how: str
    #: Who: an auth.Principal key ("" for the server, or anyone while authorization is off) ...
    principal: str = ""
    #: ... and the client address, when a client did it.
    address: str = ""
    #: The request it stopped (notifications/cancelled's requestId), else the job's.
    request_id: object = None


def job_stopped(job, stop: Stop) -> asyncio.Future:
    """Record that ``job`` was stopped (cancelled), by whom and how, as a state-changing row of the
    calls log; a future done once it is in the database."""
    modern = not job.session_id or job.session_id.startswith("stateless-")
    request_id = job.request_id if stop.request_id is None else stop.request_id
    fields = {"started_at": datetime.now(dt_timezone.utc), "method": stop.how[:64], "target": job.tool[:500],
              "era": McpCall.Era.STATELESS if modern else McpCall.Era.SESSIONS,
              "principal": stop.principal[:255], "status": McpCall.Outcome.OK, "duration_ms": 0.0,
              "session_id": "" if modern else job.session_id, "job_id": job.id[:64],
              "request_id": (request_id if isinstance(request_id, str) else json.dumps(request_id))[:200],
              "client_address": stop.address[:64], "changes_state": True}
    return trail().write({name: audit.storable(value) for name, value in fields.items()})


# -- the row of a finished call -------------------------------------------------------------

def finished(request, call, message, *, status=None, job_id="") -> Optional[asyncio.Future]:
    """Record one finished call: ``message`` is its answer (None: it was cancelled and gets none),
    ``status`` overrides what the answer says (a call handed to its background job). A
    state-changing call always, and then a future done once its row is in the database, which
    its answer waits for (``Trail``); another if the sample keeps it, within its caller's share,
    in the next batch (None). The request pays for a tuple: the row is made on a writer's thread."""
    ended = time.monotonic()
    # One observation of the request's duration, in the process (histograms.py), and in the
    # OpenTelemetry histogram when a meter provider is set: both with the same attributes.
    route = call.route
    tool = route.tool if route is not None and route.calls_tool and route.request is request else audit.LOOK_UP
    labels = tracing.operation_labels(request, message, None if tool is audit.LOOK_UP else tool is not None)
    histograms.observe_operation(labels, ended - call.began)
    tracing.finish(call.span, request, message, status, ended - call.began, labels)
    writes = audit.changes_state(request, message, call.changed, tool)
    if not writes and not _kept(call, status, message):
        return None
    captured = (time.time() - (ended - call.began), ended - call.began, request, call.session, call.principal,
                call.request_bytes, message, status, job_id or call.job_id, call.span, _address(call), writes)
    if writes:
        return trail().write(captured)
    add(captured)
    return None


def _kept(call, status, message) -> bool:
    """Whether the sample and the caller's share keep the row of a call that changes nothing."""
    config = get_config()
    rate = config["CALL_LOG_SAMPLE"]
    if rate <= 0 or (rate < 1 and random.random() >= rate):
        return False
    ok = status is None and _answered_ok(message)
    return _within_cap(config["CALL_LOG_MAX_PER_SECOND"], call.caller.key, ok)  # its caller's share


def _address(call) -> str:
    # A 2025-11-25 initialize learns its address after the Call is made: its session has it.
    return call.address or call.session.address or ""


#: caller -> [this second (monotonic), rows kept in it of calls answered ok, of the rest].
_callers: OrderedDict = OrderedDict()


def _within_cap(cap, caller: str, ok: bool) -> bool:
    """Whether this process keeps one more row of the caller's this second: at most ``cap`` of
    its calls answered ok and ``cap`` of the rest, so that a busy server's log costs a bounded
    share of its CPU (making and inserting a row costs as much as serving an echo), a flood of
    one kind of call never hides the other kind, and one caller's flood spends its own share
    only. None: no cap. The least recently seen caller is forgotten past CALLERS_REMEMBERED
    (its count restarts: only callers seen within the same second could gain by it)."""
    if cap is None:
        return True
    second, kind = int(time.monotonic()), 1 if ok else 2
    counts = _callers.get(caller)
    if counts is None:
        counts = _callers[caller] = [second, 0, 0]
        if len(_callers) > CALLERS_REMEMBERED:
            _callers.popitem(last=False)
    else:
        _callers.move_to_end(caller)
        if counts[0] != second:
            counts[:] = [second, 0, 0]
    if counts[kind] >= cap:
        metrics.incr("calls_log_skipped")
        return False
    counts[kind] += 1
    return True


def _answered_ok(message) -> bool:
    if message is None or "error" in message:
        return False
    result = message.get("result")
    return not (isinstance(result, dict) and result.get("isError") is True)


def row(request, call, message, status=None, job_id="") -> dict:
    """The row of a call that ends now (what ``finished`` queues, made at once)."""
    seconds, writes = time.monotonic() - call.began, audit.changes_state(request, message, call.changed)
    return _row((time.time() - seconds, seconds, request, call.session, call.principal, call.request_bytes,
                 message, status, job_id, call.span, _address(call), writes))


def _row(captured) -> dict:
    """The model fields of a captured call (on the writer's thread: serializing the answer to
    measure it would cost the request as much again as sending it)."""
    started, seconds, request, session, principal, request_bytes, message, status, job_id, span, address, writes = \
        captured
    code = None
    if message is not None and isinstance(message.get("error"), dict):
        code = message["error"].get("code") if isinstance(message["error"].get("code"), int) else None
    client_name = (session.client_info or {}).get("name")
    fields = {"started_at": datetime.fromtimestamp(started, tz=dt_timezone.utc),
              "era": McpCall.Era.SESSIONS if session.id else McpCall.Era.STATELESS,
              "method": request.method[:64], "target": _target(request)[:500],
              "principal": (principal.key if principal is not None else "")[:255],
              "client_name": client_name[:200] if isinstance(client_name, str) else "",
              "status": status or outcome_of(message), "error_code": code, "duration_ms": seconds * 1000,
              "request_bytes": request_bytes,
              "response_bytes": None if message is None else len(jsonrpc.dumps(message)),
              "session_id": session.id or "", "job_id": (job_id or _task_id(message) or _asked_task(request))[:64],
              "request_id": (request.id if isinstance(request.id, str) else json.dumps(request.id))[:200],
              "trace_id": tracing.trace_id(span), "client_address": address[:64], "changes_state": writes,
              "arguments": audit.redacted(_arguments(request),
                                          audit.kept_names(get_config()["CALL_LOG_ARGUMENTS_KEPT"]))}
    return {name: audit.storable(value) for name, value in fields.items()}


def _arguments(request):
    """The arguments a call names (tools/call, prompts/get), or None."""
    return request.params.get("arguments") if isinstance(request.params, dict) else None


def outcome_of(message) -> str:
    Outcome = McpCall.Outcome
    if message is None:
        return Outcome.CANCELLED
    if "error" in message:
        return Outcome.ERROR
    result = message.get("result") if isinstance(message.get("result"), dict) else {}
    if result.get("isError") is True:
        return Outcome.TOOL_ERROR
    if result.get("resultType") == "task" or isinstance(result.get("task"), dict):  # a CreateTaskResult
        return Outcome.BACKGROUND
    if result.get("resultType") == "input_required" or "inputRequests" in result:
        return Outcome.INPUT_REQUIRED
    return Outcome.OK


def _task_id(message) -> str:
    """The job a CreateTaskResult names (our task ids are job ids): the 2026-07-28 extension's
    ``taskId``, or the 2025-11-25 utility's ``task.taskId``."""
    result = (message or {}).get("result")
    if not isinstance(result, dict):
        return ""
    task = result.get("task") if isinstance(result.get("task"), dict) else result
    value = task.get("taskId") if result.get("resultType") == "task" or task is not result else None
    return value if isinstance(value, str) else ""


def _asked_task(request) -> str:
    """The task a tasks/* request names (tasks/get, tasks/result, tasks/cancel ...): its job."""
    if not request.method.startswith("tasks/") or not isinstance(request.params, dict):
        return ""
    value = request.params.get("taskId")
    return value if isinstance(value, str) else ""


def _target(request) -> str:
    """The tool, prompt or resource the call names, as its method declares (methods/specs.py)."""
    target = dispatch.target_of(request)
    return target[1] if target else ""
