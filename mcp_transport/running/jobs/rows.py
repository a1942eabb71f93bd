"""A job's row in the database: its id, reading it, and the one way its status changes
(``transition``), riding out a database that is away for a while."""
import asyncio
import logging
import re
import time

from channels.db import database_sync_to_async
from django.db import InterfaceError, OperationalError
from django.utils import timezone

from ...conf import get_config
from ...methods.invoke import run_sync_or_async
from ...models import McpJob
from ...protocol.ids import new_token

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
def _insert(job):
    job.save(force_insert=True)


@database_sync_to_async
def _active_job_of_request(session_id, request_id):
    for job in McpJob.objects.filter(session_id=session_id, is_task=False, status__in=McpJob.ACTIVE):
        if job.request_id == request_id:
            return job
    return None
