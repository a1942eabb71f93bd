"""Submitting a job: its row, its call record, and the Celery task that runs it."""
import contextlib
import logging
import uuid

from ... import tracing
from ...state import control, metrics, quotas
from ...methods import threads
from ...methods.content import error_result
from ...logs import short_id
from ...models import McpJob
from ...storage import get_event_store
from .answers import finish
from .limits import celery_options, queue_of
from .modern import answers_to_keep, internal_failure, keep_answers_given_ahead
from .rows import Status, _insert, new_job_id
from .shares import caller_context, caller_of, enter_line, give_back

logger = logging.getLogger(__name__)


#: The Celery task that runs a job (worker/run.py), as the queues and the workers know it.
RUN_JOB = "mcp_transport.run_job"


async def submit(spec, arguments: dict, *, session_id: str, request_id, stream_key: str, user_id=None,
                 principal="", progress_token=None, is_task=False, ttl_ms=None, context=None, slot=None,
                 opening=None, ahead=None) -> McpJob:
    """Create the job and queue it; its answer will come on ``stream_key`` (``context``: what a
    2026-07-28 call brings instead of a session, ``modern_context()``; ``slot``: the request's
    place among its owner's running calls, which the job holds until it ends, quotas.py;
    ``opening(job_id)``: a message its stream starts with, stored before any worker can write;
    ``ahead``: the answers the call gave before anything was asked, kept before it is queued)."""
    kept = answers_to_keep(ahead or {})  # refused (-32602) before anything is spent
    # Whose share of the workers it runs in (shares.py): for a sessionless call, the key of its place.
    context = await caller_context(context, principal=principal, session_id=session_id, slot=slot)
    place = quotas.take_for_job(slot)  # before anything is spent: a call's place funds one job
    job = McpJob(id=new_job_id(), session_id=session_id, user_id=user_id, principal=principal, request_id=request_id,
                 stream_key=stream_key, tool=spec.name, arguments=arguments, progress_token=progress_token,
                 is_task=is_task, ttl_ms=ttl_ms, celery_task_id=str(uuid.uuid4()),
                 context=tracing.job_context(context) or {})
    try:
        if opening is not None:
            await get_event_store().append(session_id, stream_key, opening(job.id))
        await _insert(job)
    except BaseException:
        await quotas.release_call(place)  # no job holds it: the request's own release no longer can
        raise
    await quotas.hand_to_job(place, job.id)  # before it is queued: finish() frees it
    metrics.incr("jobs_submitted")
    await control.register_call(_CallRecord(job), job=job.id)
    await keep_answers_given_ahead(job, kept)  # before a worker can ask
    queue = queue_of(spec)
    await _enter_line(job, queue)
    try:
        await enqueue(job, spec)
    except Exception:
        logger.exception("queueing job %s (%s) failed", short_id(job.id), spec.name)
        with contextlib.suppress(Exception):  # its entry lapses anyway
            await give_back(caller_of(job), job.id, queue=queue)
        text = f"Tool {spec.name} could not be queued: the task broker is unreachable."
        await finish(job, Status.FAILED, error_result(text), error=text, **internal_failure(job))
    return job


async def _enter_line(job, queue: str) -> None:
    """In its caller's line and its queue's before a worker can see it (shares.enter_line): a
    worker that looks at another caller's job meanwhile lets it go first when its turn is."""
    try:
        await enter_line(job, queue)
    except Exception:  # Redis away: it enters the line when a worker first looks at it
        logger.warning("job %s (%s) could not enter its line", short_id(job.id), job.tool, exc_info=True)


class _CallRecord:
    """What control.register_call needs to know of a request."""

    def __init__(self, job):
        self.session_id, self.stream_key, self.request_id = job.session_id, job.stream_key, job.request_id
        self.last_beat = 0.0


async def enqueue(job, spec, countdown=None) -> None:
    """Send the job's task (``countdown``: seconds before a worker may start it)."""
    # By name: worker/, which registers the task, imports this package.
    from celery import current_app  # imports Celery: only where jobs are sent

    options = celery_options(spec)
    if countdown:
        options["countdown"] = countdown

    def send():
        current_app.tasks[RUN_JOB].apply_async(args=[job.id, job.session_id, job.stream_key],
                                               task_id=job.celery_task_id, **options)

    # kombu's publish is blocking I/O: keep it off the event loop, in the broker's own threads.
    await threads.run(threads.BROKER, threads.owner_of(job.session_id), send)
