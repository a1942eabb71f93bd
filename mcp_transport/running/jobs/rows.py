"""What every part of a job's life reads: its row in the database (its id, reading it, the one
way its status changes, ``transition``, riding out a database that is away for a while), what
its context says (its era, its caller, an internal failure), the task a ``taskId`` names, and
its keys in Redis."""
import asyncio
import json
import logging
import re
import time
from datetime import timedelta

from channels.db import database_sync_to_async
from django.db import InterfaceError, OperationalError
from django.utils import timezone

from ...conf import get_config
from ...connections import keys
from ...methods.invoke import run_sync_or_async
from ...models import McpJob
from ...protocol.ids import new_token
from ...state import quotas

logger = logging.getLogger(__name__)

Status = McpJob.Status


def new_job_id() -> str:
    """Unguessable (192 bits): it is also the MCP taskId, which alone reaches a task's result
    where no authorization context binds it ("receivers MUST generate cryptographically secure
    task IDs" -- spec 2025-11-25 basic/utilities/tasks)."""
    return new_token(24)


_JOB_ID = re.compile(r"[A-Za-z0-9_-]{32}")


def is_job_id(value) -> bool:
    """A string of the form ``new_job_id()`` makes."""
    return isinstance(value, str) and _JOB_ID.fullmatch(value) is not None


#: What a database that is not there gives (not a refused statement: that is never retried).
DATABASE_OUTAGE_ERRORS = (OperationalError, InterfaceError)


async def riding_out_database(call, *args, **kwargs):
    """``await call(*args, **kwargs)``, again after a database outage error, for up to
    DATABASE_OUTAGE_TOLERANCE seconds (a worker's writes of its job's state: its start, its end).
    For calls whose failing statement changed nothing: a conditional UPDATE (``transition``,
    ``finish``) or a read."""
    deadline, delay = time.monotonic() + get_config()["DATABASE_OUTAGE_TOLERANCE"], 0.1
    while True:
        try:
            return await call(*args, **kwargs)
        except DATABASE_OUTAGE_ERRORS:
            if time.monotonic() + delay > deadline:
                raise
            logger.warning("the database is unavailable; %s again in %.1f s", call.__name__, delay, exc_info=True)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)


def _row(job_id):
    return McpJob.objects.filter(id=job_id).first() if isinstance(job_id, str) else None


_load = database_sync_to_async(_row)


async def load(job_id, by=None):
    """The job's row (None: there is none). ``by``: the Call of a client reading its task
    (tasks/get, tasks/list ...), whose read runs in its caller's share of the handler threads
    (methods/threads.py), bounded and cancelled as its sync code is. Not on Channels' one
    thread-sensitive thread, which writes every job's row: one user's 32 polling connections
    queued another's task creation behind their reads there (13 ms became 146 ms)."""
    if by is None:
        return await _load(job_id)
    return await run_sync_or_async(_row, (job_id,), call=by)


@database_sync_to_async
def transition(job_id: str, status: str, allowed, where=None, **fields) -> bool:
    """Move the job to ``status`` if it is in one of ``allowed`` (and matches ``where``);
    True if this call moved it. The one way a job's status changes."""
    moved = McpJob.objects.filter(id=job_id, status__in=list(allowed), **(where or {})) \
        .update(status=status, updated_at=timezone.now(), **fields)
    return moved == 1


@database_sync_to_async
def insert(job):
    job.save(force_insert=True)


@database_sync_to_async
def active_job_of_request(session_id, request_id):
    for job in McpJob.objects.filter(session_id=session_id, is_task=False, status__in=McpJob.ACTIVE):
        if job.request_id == request_id:
            return job
    return None


# -- What a job's context says (both eras) -----------------------------------------------------

MODERN_ERA = "2026-07-28"
RELATED_TASK = "io.modelcontextprotocol/related-task"


def modern_context(client_capabilities: dict, log_level=None) -> dict:
    """What a 2026-07-28 call keeps on its job in place of a session."""
    return {"era": MODERN_ERA, "clientCapabilities": client_capabilities, "logLevel": log_level}


def is_2026_job(job) -> bool:
    """The job runs a 2026-07-28 call (``modern_context``): no session, its questions are
    ``inputRequests``."""
    return (job.context or {}).get("era") == MODERN_ERA


def caller_of(job) -> str:
    """Whose job it is: the caller key ``submit`` kept in its context (quotas.caller_key), which
    its caller's share of the workers counts (shares.py). A job submitted before callers were
    kept counts under its principal, else its session."""
    caller = (job.context or {}).get("caller") if isinstance(job.context, dict) else None
    if caller:
        return caller
    return quotas.caller_key(job.principal, "") if job.principal else f"session:{job.session_id}"


async def load_task(task_id, principal, *, session_id=None, modern=False, by=None):
    """The task ``task_id`` names, if it is a task of this era owned by ``principal`` (and, in the
    legacy era, of ``session_id``); else None: another's task is as unknown as one that never
    existed. Our task ids are job ids (``new_job_id``): anything else is not looked up (a NUL,
    say, which the database would refuse in a query). An expired task is returned
    (``task_expired``): the legacy era tells it apart. ``by``: the Call reading it (``load``)."""
    job = await load(task_id, by=by) if is_job_id(task_id) else None
    if job is None or not job.is_task or is_2026_job(job) != modern or job.principal != principal:
        return None
    return job if session_id is None or job.session_id == session_id else None


def task_expired(job) -> bool:
    """Its ttl has passed: no one may read it, though its row stays until the cleanup."""
    return job.ttl_ms is not None and timezone.now() > job.created_at + timedelta(milliseconds=job.ttl_ms)


def internal_failure(job) -> dict:
    """The row fields that say a job failed for the server's reasons, not its tool's: the tasks
    extension shows those as ``failed`` (a tool's error result is ``completed``, isError)."""
    return {"context": {**(job.context or {}), "failure": "internal"}}


def failed_internally(job) -> bool:
    return (job.context or {}).get("failure") == "internal"


def related_task_meta(job) -> dict:
    return {RELATED_TASK: {"taskId": job.id}}


# -- The job's keys in Redis, and how their values are written -----------------------------------

def inputs_key(job) -> str:
    """The questions a 2026-07-28 job waits on the client for: a hash of inputRequests key ->
    ``{"id": <reply id>, "method", "params"}``. tasks/get shows them; tasks/update and the retry
    of a call deliver their answers (following.deliver_inputs)."""
    return f"{keys().prefix}:jobinput:{job.id}"


def ahead_key(job) -> str:
    """The answers a 2026-07-28 call gave its job ahead, before any question was asked under
    their keys: a hash of inputRequests key -> the answer (JSON). Only a question the tool
    declares ``answerable_ahead`` reads it (following.answer_given_ahead)."""
    return f"{keys().prefix}:jobahead:{job.id}"


def pending_request_key(job) -> str:
    """The requests a task-augmented job waits on the client for (a hash: request id -> message),
    so tasks/result can send them."""
    return f"{keys().prefix}:jobpending:{job.id}"


def json_text(value) -> str:
    """``value`` as compact JSON text, as the job's Redis hashes keep it (not jsonrpc.dumps:
    that one makes the bytes of a message on the wire)."""
    return json.dumps(value, separators=(",", ":"))
