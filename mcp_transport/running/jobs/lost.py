"""Lost workers: a job whose worker stopped beating its heartbeat (or whose call record Redis
lost, or whose broker message went missing) is noticed by whoever looks at it (the connection
following its stream, a resume, tasks/get, the cleanup), and either queued again, if its tool is
declared idempotent, or answered with an error result."""
import logging
import time
import uuid

import redis as redis_sync
from channels.db import database_sync_to_async
from django.utils import timezone

from ...state import control, metrics
from ...conf import get_config, redis_url
from ...connections import async_redis, keys
from ...methods.content import error_result
from ...logs import short_id
from ...models import McpJob
from ...methods.registry import registry
from .answers import answer, finish, waits_for_caller
from .deferring import DEFER_MAX_SECONDS
from .limits import max_attempts, time_limits
from .modern import internal_failure
from .rows import Status, load, transition
from .shares import WAIT_GRACE_SECONDS
from .submitting import _CallRecord, enqueue
from .unclaimed import expire_unclaimed
from .waiting import expire_parked

logger = logging.getLogger(__name__)


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
    """A job over its caller's share (deferring.py) that nobody has looked at for longer than a
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
    await control.register_call(_CallRecord(job), job=job.id)
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
    "time_limit" or "lost"): stop its heartbeat now, so the next look at the job (jobs.watch)
    answers it. Plain Redis, no event loop and no database: that process forks new pool
    processes at any moment, and a fork copies whatever lock another thread holds."""
    client = redis_sync.Redis.from_url(redis_url())
    try:
        client.hset(keys().call(session_id, stream_key), mapping={"beat": 0, "stopped": reason})
    finally:
        client.close()
