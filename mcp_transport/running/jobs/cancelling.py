"""Cancelling a job (a client's notifications/cancelled or tasks/cancel, the admin, a closed
session): its end without a response, its worker told, its Celery task revoked or its pool
process stopped, and its row in the audit trail: who stopped it, and how (a ``calls.Stop``; a
tasks/cancel's own row in the calls log is its stop's)."""
import logging

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async

from ...state import control
from ...methods import threads
from ...conf import get_config
from ...logs import short_id
from ...models import McpJob
from .. import calls
from ..calls import Stop
from .answers import finish
from .deferring import release
from .rows import Status, _active_job_of_request, load

logger = logging.getLogger(__name__)

CANCELLED_BY_CLIENT = "Cancelled by the client."


def cancel_key(job) -> str:
    """The job's key in ``control.running``: not its request id, which the client may reuse
    once a task-augmented call has returned its task."""
    return f"job:{job.id}"


async def acancel(job_id: str, reason: str = CANCELLED_BY_CLIENT, stop: Stop = None) -> bool:
    """Cancel a job that has not ended; False if it had (or does not exist). ``stop``: who
    cancels it and how, recorded in the audit trail once it is cancelled (None: the caller's
    own record says it, as a tasks/cancel's does)."""
    for _attempt in range(5):
        job = await load(job_id)
        if job is None or job.is_terminal:
            return False
        # Only from the status just read: a worker that takes the job in between makes this
        # miss (and read again), so a job cancelled while queued never starts, and one that
        # started meanwhile has its worker told and stopped, not only its task revoked.
        was = job.status
        if await finish(job, Status.CANCELLED, error=reason, allowed=(was,)):
            break
    else:
        return False
    await control.publish("cancel", job.session_id, r=cancel_key(job))
    if was == Status.QUEUED:
        await _revoke(job)
    else:
        await _stop_running(job)
    await _leave_share(job)
    if stop is not None:
        await calls.job_stopped(job, stop)
    return True


async def _leave_share(job) -> None:
    """Out of its caller's line, or its place among its caller's running jobs given back (its
    tool has JOB_CANCEL_GRACE_SECONDS to stop): the caller's next job need not wait for it."""
    try:
        await release(job)
    except Exception:  # the entries lapse anyway (shares.py)
        logger.warning("giving back the place of job %s failed", short_id(job.id), exc_info=True)


#: How a job cancelled from sync code is recorded when its caller says nothing else.
CANCELLED_FROM_CODE = Stop("cancel (jobs.cancel)")


def cancel(job_id: str, reason: str = "Cancelled by an administrator.", stop: Stop = CANCELLED_FROM_CODE) -> bool:
    """Cancel a job from sync code (the admin, a shell, a Celery task): the same path as a
    client's notifications/cancelled. True if the job was running or queued."""
    return async_to_sync(acancel)(job_id, reason, stop)


async def cancel_request(session_id: str, request_id, stop: Stop = None) -> bool:
    """notifications/cancelled for a plain (not task-augmented) background call."""
    job = await _active_job_of_request(session_id, request_id)
    return job is not None and await acancel(job.id, CANCELLED_BY_CLIENT, stop)


async def _revoke(job):
    from celery import current_app

    def revoke():
        current_app.control.revoke(job.celery_task_id)

    try:
        await threads.run(threads.BROKER, threads.owner_of(job.session_id), revoke)
    except Exception:  # the worker checks the row before it starts anyway
        logger.warning("revoking job %s failed", short_id(job.id), exc_info=True)


#: The worker's remote control command that kills the pool process of a cancelled job which
#: did not stop on its own in time (worker.stop_job).
STOP_JOB = "mcp_stop_job"


async def _stop_running(job):
    """Ask the workers to free the slot of a cancelled job that is still running: whichever
    runs it kills its pool process unless the tool stops on its own (it has just been told)
    within JOB_CANCEL_GRACE_SECONDS. A tool blocked in a sleep or a C call never looks at
    ``ctx.cancelled``, and would hold its slot until its time limit."""
    from celery import current_app

    grace = get_config()["JOB_CANCEL_GRACE_SECONDS"]
    if grace is None or not job.celery_task_id:
        return

    def broadcast():
        current_app.control.broadcast(STOP_JOB, arguments={"task_id": job.celery_task_id, "grace": grace})

    try:
        await threads.run(threads.BROKER, threads.owner_of(job.session_id), broadcast)
    except Exception:  # the tool still sees ctx.cancelled, and its time limit still holds
        logger.warning("asking the workers to stop job %s failed", short_id(job.id), exc_info=True)


async def end_session_jobs(session_ids, reason: str = "closed", by=("", "")) -> int:
    """Cancel the background jobs of sessions that closed (DELETE, terminate, expiry): a job
    waiting for its gone client, parked or in its slot, ends now rather than at its timeout.
    ``reason``, ``by``: why the sessions closed and who closed them (sessions.close)."""
    active = await _active_jobs_of_sessions(list(session_ids))
    stop = closed_session_stop(reason, by)
    ended = 0
    for job_id in active:
        ended += await acancel(job_id, "Its session was closed.", stop)
    return ended


def closed_session_stop(reason, by) -> Stop:
    """The stop of a job whose session closed: "session deleted" (its client's DELETE), "session
    terminated" (an administrator), "session expired" (the server), by whom."""
    principal, address = (list(by) + ["", ""])[:2] if isinstance(by, (list, tuple)) else ("", "")
    return Stop(f"session {reason or 'closed'}", str(principal or ""), str(address or ""))


@database_sync_to_async
def _active_jobs_of_sessions(session_ids):
    return list(McpJob.objects.filter(session_id__in=session_ids, status__in=McpJob.ACTIVE)
                .values_list("id", flat=True))
