"""The log of recent calls (``models.McpCall``), both eras, written in batches off the request path.

``finished()`` is called once per request where it is finished (its answer is written, or its
work handed to a background job), by the request pipeline alone (pipeline.py: ``record``), in
both eras and on every transport (with no answer when its client left before it). It hands
``add()`` what it knows (a tuple of references) and returns at once: no database write, no
Redis round trip and no serializing on the hot path. The captured calls wait in the process,
and a task of the loop makes their rows and bulk-inserts them every ``INTERVAL`` seconds or
``BATCH`` rows, on a thread of their own (as the event rows' ``persist.EventTable``), so the
loop never waits on the database. At most ``MAX_WAITING`` rows
wait: past that (a database outage) new rows are dropped and counted (``calls_log_dropped``),
since the log is an operator's view, not a durable record. ``CALL_LOG_SAMPLE`` chooses which
calls are kept, ``CALL_LOG_MAX_PER_SECOND`` caps the rows a process keeps per second (calls
answered ok and the rest counted apart, the calls past it counted as ``calls_log_skipped``);
the cleanup deletes rows older than ``CALL_LOG_RETENTION``.
"""
import asyncio
import json
import logging
import random
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone as dt_timezone

from django.db import InterfaceError, OperationalError, close_old_connections

from .. import tracing
from ..conf import get_config
from ..models import McpCall
from ..methods import dispatch
from ..protocol import jsonrpc
from ..state import metrics

logger = logging.getLogger(__name__)

#: Seconds between writes, rows per write, and the most rows that may wait.
INTERVAL = 1.0
BATCH = 500
MAX_WAITING = 10_000

_waiting: list = []
_full = None
_task = None
_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-calls-db")


def add(captured: tuple) -> None:
    """Queue one call for the next batch (call it on the event loop)."""
    global _task, _full
    if len(_waiting) >= MAX_WAITING:
        metrics.incr("calls_log_dropped")
        return
    _waiting.append(captured)
    loop = asyncio.get_running_loop()
    if _task is None or _task.done() or _task.get_loop() is not loop:
        _full = asyncio.Event()
        _task = loop.create_task(_run())
    if len(_waiting) >= BATCH:
        _full.set()


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
    if _full is not None:
        _full.clear()
    rows = _waiting[:]
    del _waiting[:]
    loop = asyncio.get_running_loop()
    for start in range(0, len(rows), BATCH):
        batch = rows[start:start + BATCH]
        try:
            await loop.run_in_executor(_executor, _write, batch)
        except (OperationalError, InterfaceError):
            # The database is away (down, or out of connections): keep the rows for the next
            # write, in order, within MAX_WAITING; before, the whole batch was lost at once.
            unwritten = rows[start:]
            logger.warning("%d call log rows could not be written yet", len(unwritten), exc_info=True)
            kept = unwritten[:max(0, MAX_WAITING - len(_waiting))]
            _waiting[:0] = kept
            if len(kept) < len(unwritten):
                metrics.incr("calls_log_dropped", len(unwritten) - len(kept))
            return
        except Exception:
            # The database refused a row and would refuse it again: kept, it would stall the log
            # for every client. The others go in one by one.
            logger.warning("a call log batch was refused; writing its rows one by one", exc_info=True)
            await loop.run_in_executor(_executor, _write_one_by_one, batch)


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
        return McpCall(**_row(captured))
    except Exception:  # one odd call must not cost the batch
        logger.warning("a call log row could not be made", exc_info=True)
        return None


# -- the row of a finished call -------------------------------------------------------------

def finished(request, call, message, *, status=None, job_id="") -> None:
    """Record one finished call, if the sample keeps it: ``message`` is its answer (None: it was
    cancelled and gets none), ``status`` overrides what the answer says (a call handed to its
    background job). The request pays for a tuple: the row is made on the writer's thread."""
    ended = time.monotonic()
    tracing.finish(call.span, request, message, status, ended - call.began)
    config = get_config()
    rate = config["CALL_LOG_SAMPLE"]
    if rate <= 0 or (rate < 1 and random.random() >= rate):
        return
    if not _within_cap(config["CALL_LOG_MAX_PER_SECOND"], status is None and _answered_ok(message)):
        return
    add((time.time() - (ended - call.began), ended - call.began, request, call.session, call.principal,
         call.request_bytes, message, status, job_id or call.job_id, call.span))


#: This second (monotonic), and the rows kept in it so far: of calls answered ok, of the rest.
_this_second = [0, 0, 0]


def _within_cap(cap, ok: bool) -> bool:
    """Whether this process keeps one more row this second: at most ``cap`` of calls answered ok
    and ``cap`` of the rest, so that a busy server's log costs a bounded share of its CPU (making
    and inserting a row costs as much as serving an echo) and a flood of one kind of call never
    hides the other kind. None: no cap."""
    if cap is None:
        return True
    second, kind = int(time.monotonic()), 1 if ok else 2
    if _this_second[0] != second:
        _this_second[:] = [second, 0, 0]
    if _this_second[kind] >= cap:
        metrics.incr("calls_log_skipped")
        return False
    _this_second[kind] += 1
    return True


def _answered_ok(message) -> bool:
    if message is None or "error" in message:
        return False
    result = message.get("result")
    return not (isinstance(result, dict) and result.get("isError") is True)


def row(request, call, message, status=None, job_id="") -> dict:
    """The row of a call that ends now (what ``finished`` queues, made at once)."""
    seconds = time.monotonic() - call.began
    return _row((time.time() - seconds, seconds, request, call.session, call.principal, call.request_bytes,
                 message, status, job_id, call.span))


def _row(captured) -> dict:
    """The model fields of a captured call (on the writer's thread: serializing the answer to
    measure it would cost the request as much again as sending it)."""
    started, seconds, request, session, principal, request_bytes, message, status, job_id, span = captured
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
              "trace_id": tracing.trace_id(span)}
    return {name: _storable(value) for name, value in fields.items()}


def _storable(value):
    """Client text as every database takes it: PostgreSQL refuses a NUL in text (one such call
    lost its whole batch of rows), and no database takes a lone surrogate (JSON may carry both)."""
    if not isinstance(value, str):
        return value
    return value.replace("\x00", "\N{REPLACEMENT CHARACTER}").encode("utf-8", "replace").decode("utf-8")


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
