"""Settling a job that has not ended: cancelling it, failing it when no worker takes it, and
noticing that its worker was lost. Its end itself is outcome.finish.

Cancelling (a client's notifications/cancelled or tasks/cancel, the admin, a closed session):
its end without a response, its worker told, its Celery task revoked or its pool process
stopped, and its row in the audit trail: who stopped it, and how (a ``calls.Stop``; a
tasks/cancel's own row in the calls log is its stop's).

Unclaimed: a job no worker takes is failed after JOB_QUEUE_TIMEOUT unless its queue is served
(``worker_command`` says how to start a worker consuming it).

Lost: a job whose worker stopped beating its heartbeat (or whose call record Redis lost, or
whose broker message went missing) is noticed by whoever looks at it (the connection following
its stream, a resume, tasks/get, the cleanup), and either queued again, if its tool is declared
idempotent, or answered with an error result.
"""
import logging
import time
import uuid
from datetime import timedelta

import redis as redis_sync
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.db.models import Q
from django.utils import timezone

from ...conf import get_config, redis_url
from ...connections import async_redis, keys
from ...logs import short_id
from ...methods import threads
from ...methods.content import error_result
from ...methods.registry import registry
from ...models import McpJob
from ...state import control, metrics
from .. import calls
from ..calls import Stop
from .following import expire_parked
from .outcome import answer, finish, waits_for_caller
from .rows import Status, active_job_of_request, internal_failure, load, transition
from .shares import WAIT_GRACE_SECONDS
from .submitting import DEFER_MAX_SECONDS, CallRecord, enqueue, max_attempts, queue_of, release, time_limits

logger = logging.getLogger(__name__)


# -- Cancelling ----------------------------------------------------------------------------------

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
    job = await active_job_of_request(session_id, request_id)
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
#: did not stop on its own in time (worker/parent.py: mcp_stop_job).
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


# -- Jobs no worker takes ------------------------------------------------------------------------

async def expire_unclaimed(job) -> bool:
    """Fail a job that no worker took within JOB_QUEUE_TIMEOUT (no worker runs, none consumes
    its queue, or they do not know the task and discard it), so that its client gets an error
    result instead of waiting in silence; revoke it, so that a worker starting later skips it."""
    timeout = get_config()["JOB_QUEUE_TIMEOUT"]
    if timeout is None or (timezone.now() - job.updated_at).total_seconds() < timeout:
        return False
    queue = queue_of(registry.tools.get(job.tool))
    if await _queue_is_served(queue, timeout):
        # Busy workers are a backlog, not a missing worker: one client filling the queue with
        # long jobs must not fail every other client's call after JOB_QUEUE_TIMEOUT.
        return False
    text = no_worker_text(job.tool, queue, timeout)
    if not await finish(job, Status.FAILED, error_result(text), error=text, allowed=(Status.QUEUED,),
                        where={"celery_task_id": job.celery_task_id}):
        return False  # a worker took it meanwhile
    logger.warning("job %s (%s): %s", short_id(job.id), job.tool, text)
    await _revoke(job)
    return True


@database_sync_to_async
def _queue_is_served(queue: str, window_seconds: float) -> bool:
    """A worker consumes the queue: one of its jobs is running, or a worker started or finished
    one in the window. The finish counts too: between a long job's end and the worker taking the
    next job, nothing runs and the long job started long ago, yet the queue is served."""
    tools = [name for name, spec in registry.tools.items() if spec.background and queue_of(spec) == queue]
    since = timezone.now() - timedelta(seconds=window_seconds)
    running = (Q(status__in=(Status.WORKING, Status.INPUT_REQUIRED)) | Q(started_at__gte=since)
               | Q(started_at__isnull=False, finished_at__gte=since))
    return McpJob.objects.filter(running, tool__in=tools).exists()


def no_worker_text(tool: str, queue: str, timeout) -> str:
    return (f"No worker took tool {tool} within {timeout:g} s: start a Celery worker of this project "
            f"({worker_command(queue)}) that consumes the queue {queue!r}.")


def worker_command(queue: str | None = None) -> str:
    """The command that starts a worker of this project's Celery app, consuming the queue when it
    is not Celery's default one (the worker's default)."""
    from celery import current_app

    command = f"celery -A {celery_app_name()} worker"
    if queue and queue != current_app.conf.task_default_queue:
        command += f" -Q {queue}"
    return command


def celery_app_name() -> str:
    """What ``celery -A`` takes for this project: its Celery app's main name (Celery's Django
    recipe: ``Celery("mysite")`` in mysite/celery.py), else the package of the settings module."""
    import os

    from celery import current_app

    main = current_app.main
    if main and main != "__main__":
        return main
    settings_module = os.environ.get("DJANGO_SETTINGS_MODULE", "")
    return settings_module.split(".")[0] or "<project>"


# -- Lost workers --------------------------------------------------------------------------------

async def watch(session_id: str, stream_key: str, call: dict, by=None) -> bool:
    """Called when a job's stream has been quiet: True if the job turned out lost (or ended
    without its answer on the stream) and was dealt with now. ``by``: the Call of a client's
    read of its task (tasks/get), whose reads run in its share (rows.load)."""
    if "done" in call:
        return False
    if "parked" in call:  # no worker runs it: it waits for its client, for a while
        return await expire_parked(session_id, call)
    if not control.looks_dead(call):
        return False
    job = await load(call.get("job"), by=by)
    if job is None:
        return False
    stopped = call.get("stopped")
    if job.status == Status.QUEUED:
        if stopped == "database" or deferral_lost(job):  # its message is gone: sent again
            return await resend(job)
        return await expire_unclaimed(job)  # no worker yet: the broker keeps it, for a while
    if job.is_terminal:
        await answer(job)  # ended, but whoever ended it died before writing the answer
        return True
    if just_started(job):
        return False  # its worker beats right after taking it: the record read above predates that
    await worker_lost(job, hard_limit=stopped == "time_limit", database=stopped == "database")
    return True


def deferral_lost(job) -> bool:
    """A job over its caller's share (submitting.defer) that nobody has looked at for longer than a
    deferral lasts: the worker holding its delayed message died (a Redis broker gives such a
    message back only after its visibility timeout, an hour by default), and no place given
    back woke it."""
    if not waits_for_caller(job) or job.updated_at is None:
        return False
    return (timezone.now() - job.updated_at).total_seconds() > DEFER_MAX_SECONDS + WAIT_GRACE_SECONDS


def just_started(job) -> bool:
    """A worker took the job less than the orphan delay ago. A job that waited in the queue has
    a stale beat in its call record until its worker's first one, written just after the row
    says working: a look between the two took a fresh worker for a lost one (bench/chaos.py: a
    job queued while the worker restarted failed "worker lost" as the new worker began it)."""
    if job.started_at is None:
        return False
    return (timezone.now() - job.started_at).total_seconds() * 1000 < control.orphan_after_ms()


async def watch_job(job, by=None) -> None:
    call = await async_redis().hgetall(keys().call(job.session_id, job.stream_key))
    if not call:  # Redis lost the record: rebuilt from the row (``recall``)
        call = await recall(job.session_id, job.stream_key)
    if call:
        await watch(job.session_id, job.stream_key, call, by=by)


async def recall(session_id: str, stream_key: str) -> dict:
    """The call record of a background call that Redis forgot (restarted empty, flushed),
    rebuilt from its job's row and written again; {} when no job of the stream is active.

    A running job's worker writes the record again at its next beat, so the rebuilt one beats
    now: the worker gets the usual grace before it is taken for lost. A queued job's broker
    message went with that Redis when the broker is the same server: it is sent again. A job
    waiting for its client is left to the cleanup (``end_unreachable``): its questions are gone."""
    job = await _active_job_of_stream(session_id, stream_key)
    if job is None or job.status == Status.INPUT_REQUIRED:
        return {}
    await control.register_call(CallRecord(job), job=job.id)
    logger.warning("Redis had lost the call record of job %s (%s); rebuilt it from the database",
                   short_id(job.id), job.tool)
    if job.status == Status.QUEUED:
        await resend(job)
    return await control.read_call(session_id, stream_key)


@database_sync_to_async
def _active_job_of_stream(session_id, stream_key):
    return McpJob.objects.filter(session_id=session_id, stream_key=stream_key, status__in=McpJob.ACTIVE).first()


async def resend(job) -> bool:
    """Send a queued job's task again (its message went with a Redis that lost everything, or
    its worker could not start it without the database), under a new task id: if the broker kept the old message
    after all, the worker that takes it skips it (worker/run.py runs only the row's task id), so the
    job runs once. True if this call sent it (of two processes noticing, one does)."""
    spec = registry.tools.get(job.tool)
    retry_id = str(uuid.uuid4())
    if spec is None or not await transition(job.id, Status.QUEUED, (Status.QUEUED,),
                                            where={"celery_task_id": job.celery_task_id},
                                            celery_task_id=retry_id,
                                            message="Queued again: its first sending was lost."):
        return False
    job.celery_task_id = retry_id
    record = keys().call(job.session_id, job.stream_key)
    async with async_redis().pipeline(transaction=False) as pipe:
        # Beating from now, no longer "stopped": the next look waits for the new sending.
        pipe.hset(record, "beat", int(time.time() * 1000))
        pipe.hdel(record, "stopped")
        await pipe.execute()
    await enqueue(job, spec)
    metrics.incr("jobs_resent")
    logger.warning("job %s (%s): its first sending was lost (Redis or the database); sent it again",
                   short_id(job.id), job.tool)
    return True


async def current(job, by=None):
    """The job as it stands now (tasks/get): one that has not ended is looked at first, so that a
    task whose worker died does not stay "working" forever (watch_job). ``by``: the Call reading
    it (rows.load)."""
    if job.is_terminal:
        return job
    await watch_job(job, by=by)
    return await load(job.id, by=by)


async def worker_lost(job, hard_limit=False, database=False) -> None:
    """The worker running the job died (or Celery stopped it at its hard time limit, or it could
    not write the job's end to an unreachable database): queue it again if the tool is
    idempotent and has runs left, else answer with an error result."""
    spec = registry.tools.get(job.tool)
    if spec is not None and spec.idempotent and job.attempts < max_attempts(spec) and not hard_limit:
        retry_id = str(uuid.uuid4())
        if await transition(job.id, Status.QUEUED, (Status.WORKING, Status.INPUT_REQUIRED),
                            where={"attempts": job.attempts}, celery_task_id=retry_id, worker="",
                            message=f"Its worker was lost; queued again (attempt {job.attempts + 1})."):
            job.celery_task_id, job.status = retry_id, Status.QUEUED
            await control.beat(job.session_id, job.stream_key)
            await enqueue(job, spec)
        return
    limit = time_limits(spec)[1] if spec is not None else None
    if hard_limit or limit and job.started_at and (timezone.now() - job.started_at).total_seconds() >= limit:
        text = hard_limit_text(limit)
    elif database:
        text = (f"Tool {job.tool} ran, but its worker could not record how it ended: the database was "
                f"unreachable for over {get_config()['DATABASE_OUTAGE_TOLERANCE']:g} s.")
    else:
        text = (f"The worker running tool {job.tool} was lost before it finished"
                + (f" ({job.attempts} attempts)." if spec is not None and spec.idempotent
                   else "; the call was not retried because the tool is not declared idempotent."))
    await finish(job, Status.FAILED, error_result(text), error=text, **internal_failure(job))


def hard_limit_text(limit) -> str:
    return f"The tool exceeded its hard time limit of {limit} s and was stopped."


def mark_stopped(session_id: str, stream_key: str, reason: str) -> None:
    """From Celery's main process, when a pool process running a job stopped (``reason``:
    "time_limit" or "lost"): stop its heartbeat now, so the next look at the job (``watch``)
    answers it. Plain Redis, no event loop and no database: that process forks new pool
    processes at any moment, and a fork copies whatever lock another thread holds."""
    client = redis_sync.Redis.from_url(redis_url())
    try:
        client.hset(keys().call(session_id, stream_key), mapping={"beat": 0, "stopped": reason})
    finally:
        client.close()
