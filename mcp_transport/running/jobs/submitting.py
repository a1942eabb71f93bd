"""Submitting a job: its row, its call record, the answers its call gave ahead, and the Celery
task that runs it, on its tool's queue within its tool's time limits; and a job that may not
start yet (shares.py), back to the queue without taking a worker slot and woken when its turn
comes.

Deferring. A deferred job stays ``queued`` (tasks/get says why), its Celery task is sent again
with a countdown under a new task id (the row's ``celery_task_id`` names the one message that
may run it, as for settling.resend), and its row's ``updated_at`` moves, so JOB_QUEUE_TIMEOUT
never takes it for a job no worker takes. The countdown grows with the time the job has waited
(``defer_seconds``: 1 s to DEFER_MAX_SECONDS), so a long line costs a few messages a minute,
not a loop; the usual way out is sooner: a job that ends (or parks, or is cancelled) gives its
place back and the job whose turn it is, of whichever caller, is sent again at once
(``release``); so is the job another one let go first (``wake``).
"""
import contextlib
import logging
import uuid
from typing import Optional

from django.utils import timezone

from ... import tracing
from ...conf import get_config
from ...connections import async_redis
from ...logs import short_id
from ...methods import threads
from ...methods.content import error_result
from ...methods.registry import registry
from ...models import McpJob
from ...protocol import mrtr
from ...state import control, metrics, quotas, sessions
from ...storage import get_event_store
from .outcome import CALLER_BUSY, OTHERS_FIRST, finish, waits_for_caller
from .rows import (
    Status, ahead_key, caller_of, insert, internal_failure, json_text, load, new_job_id, task_expired, transition,
)
from .shares import enter_line, give_back, key_base, renew_wait

logger = logging.getLogger(__name__)


# -- How Celery runs a tool's jobs ---------------------------------------------------------------

#: The Celery task that runs a job (worker/run.py), as the queues and the workers know it.
RUN_JOB = "mcp_transport.run_job"


def queue_of(spec) -> str:
    """The queue a tool's jobs are sent to: its own, or Celery's default queue."""
    from celery import current_app

    queue = spec.job_options.get("queue") if spec is not None else None
    return queue or current_app.conf.task_default_queue


def max_attempts(spec) -> int:
    """Runs of an idempotent tool whose workers keep dying: Celery's ``max_retries`` + 1."""
    retries = spec.job_options.get("max_retries")
    return (3 if retries is None else retries) + 1


#: Seconds between a tool's own soft time limit and the hard one it gets when it sets only the
#: soft one, past the default hard limit: time to clean up after SoftTimeLimitExceeded.
SOFT_TO_HARD_SECONDS = 60


def time_limits(spec) -> tuple:
    """The (soft, hard) Celery time limits of a tool's jobs: its own, else JOB_SOFT_TIME_LIMIT
    and JOB_TIME_LIMIT. A soft limit at or past the hard one would never fire: a tool that
    sets only a hard limit below the default soft one has none, and one that sets only a soft
    limit past the default hard one gets a hard limit SOFT_TO_HARD_SECONDS after it."""
    config, options = get_config(), spec.job_options if spec is not None else {}
    soft, hard = options.get("soft_time_limit"), options.get("time_limit")
    if soft is None and hard is None:
        soft, hard = config["JOB_SOFT_TIME_LIMIT"], config["JOB_TIME_LIMIT"]
    elif soft is None:
        default = config["JOB_SOFT_TIME_LIMIT"]
        soft = default if default is not None and default < hard else None
    elif hard is None:
        default = config["JOB_TIME_LIMIT"]
        hard = default if default is not None and default > soft else soft + SOFT_TO_HARD_SECONDS
    return soft, hard


def celery_options(spec) -> dict:
    """Per-call Celery options: the queue routes the job, the limits are Celery's own."""
    soft, hard = time_limits(spec)
    options = {"queue": spec.job_options.get("queue"), "soft_time_limit": soft, "time_limit": hard}
    return {key: value for key, value in options.items() if value is not None}


# -- Creating and queueing it --------------------------------------------------------------------

async def submit(spec, arguments: dict, *, session_id: str, request_id, stream_key: str, user_id=None,
                 principal="", caller: Optional[str] = None, progress_token=None, is_task=False, ttl_ms=None,
                 context=None, slot=None, opening=None, ahead=None) -> McpJob:
    """Create the job and queue it; its answer will come on ``stream_key`` (``caller``: the
    caller key its share of the workers counts, quotas.caller_key, else found from its principal
    or its session; ``context``: what a 2026-07-28 call brings instead of a session,
    ``modern_context()``; ``slot``: the request's place among its owner's running calls, which
    the job holds until it ends, quotas.py; ``opening(job_id)``: a message its stream starts
    with, stored before any worker can write; ``ahead``: the answers the call gave before
    anything was asked, kept before it is queued)."""
    kept = answers_to_keep(ahead or {})  # refused (-32602) before anything is spent
    caller = caller or await default_caller(principal, session_id, sessionless=context is not None)
    place = quotas.take_for_job(slot)  # before anything is spent: a call's place funds one job
    job = McpJob(id=new_job_id(), session_id=session_id, user_id=user_id, principal=principal, request_id=request_id,
                 stream_key=stream_key, tool=spec.name, arguments=arguments, progress_token=progress_token,
                 is_task=is_task, ttl_ms=ttl_ms, celery_task_id=str(uuid.uuid4()),
                 context=tracing.job_context({**(context or {}), "caller": caller}) or {})
    try:
        if opening is not None:
            await get_event_store().append(session_id, stream_key, opening(job.id))
        await insert(job)
    except BaseException:
        await quotas.release_call(place)  # no job holds it: the request's own release no longer can
        raise
    await quotas.hand_to_job(place, job.id)  # before it is queued: finish() frees it
    metrics.incr("jobs_submitted")
    await control.register_call(CallRecord(job), job=job.id)
    await keep_answers_given_ahead(job, kept)  # before a worker can ask
    queue = queue_of(spec)
    await _enter_line(job, queue)
    try:
        await enqueue(job, spec)
    except Exception:
        logger.exception("queueing job %s (%s) failed", short_id(job.id), spec.name)
        with contextlib.suppress(Exception):  # its entry lapses anyway
            await give_back(caller, job.id, queue=queue)
        text = f"Tool {spec.name} could not be queued: the task broker is unreachable."
        await finish(job, Status.FAILED, error_result(text), error=text, **internal_failure(job))
    return job


async def default_caller(principal: str, session_id: str, sessionless: bool) -> str:
    """The caller key of a job whose call did not name it (``submit``'s ``caller``): its
    principal's, else its session's client address's; a job with neither counts alone."""
    if principal:
        return quotas.caller_key(principal, "")
    if not sessionless:
        try:
            session = await sessions.load(session_id)
        except Exception:  # Redis away: the session counts alone
            logger.warning("reading session %s for its address failed", session_id[:8], exc_info=True)
            session = None
        if session is not None and session.address:
            return quotas.caller_key("", session.address)
    return f"session:{session_id}"


async def _enter_line(job, queue: str) -> None:
    """In its caller's line and its queue's before a worker can see it (shares.enter_line): a
    worker that looks at another caller's job meanwhile lets it go first when its turn is."""
    try:
        await enter_line(job, queue)
    except Exception:  # Redis away: it enters the line when a worker first looks at it
        logger.warning("job %s (%s) could not enter its line", short_id(job.id), job.tool, exc_info=True)


class CallRecord:
    """What control.register_call needs to know of a job's request."""

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


# -- The answers a 2026-07-28 call gives ahead ---------------------------------------------------

def answers_to_keep(answers: dict) -> dict:
    """``answers`` given ahead (key -> answer) as a job keeps them (key -> JSON), checked before
    anything is kept: at most MAX_REQUEST_STATE_BYTES, the most of a client's answers an inline
    call carries from round to round (-32602 otherwise)."""
    kept = {key: json_text(value) for key, value in answers.items()}
    size, limit = sum(len(key) + len(value) for key, value in kept.items()), get_config()["MAX_REQUEST_STATE_BYTES"]
    if size > limit:
        raise mrtr.too_much_ahead(size, limit)
    return kept


async def keep_answers_given_ahead(job, kept: dict) -> None:
    """Keep ``kept`` (``answers_to_keep``) as the answers given ahead to ``job``, in place of any
    kept before (so they are never more than one request's), for STREAM_TTL; none: nothing
    changes. A question takes them in following.answer_given_ahead."""
    if not kept:
        return
    names = ahead_key(job)
    async with async_redis().pipeline(transaction=True) as pipe:
        pipe.delete(names)
        pipe.hset(names, mapping=kept)
        pipe.expire(names, get_config()["STREAM_TTL"])
        await pipe.execute()


# -- A job that may not start yet: deferred, and woken when its turn comes ------------------------

#: The longest countdown of a deferred job (seconds): a fallback, since a place given back wakes
#: the job whose turn it is at once.
DEFER_MAX_SECONDS = 30
#: How many ended jobs at the head of the line a wake skips before it gives up.
WAKE_TRIES = 5
#: Milliseconds a wake's message is known as one (``_sent_now``): longer than it takes a free
#: worker to take it.
WOKEN_MS = 60_000


def defer_seconds(job) -> float:
    """When to look at a job over its caller's share again: 1 s at first, a quarter of the time
    it has waited later, DEFER_MAX_SECONDS at most."""
    waited = (timezone.now() - job.created_at).total_seconds()
    return min(max(1.0, waited / 4), DEFER_MAX_SECONDS)


async def defer(job, spec, limit: int, seconds: float, why: str = "share") -> None:
    """The job waits (``why``: shares.Turn's): sent again in ``seconds`` (it is in the line
    already: shares.take_place). A task whose ttl has passed meanwhile ends instead: nobody
    could read its result."""
    if job.is_task and task_expired(job):
        await give_back(caller_of(job), job.id, queue=queue_of(spec))
        text = f"Tool {job.tool} did not start within its task's ttl: its caller's other jobs held every place."
        await finish(job, Status.FAILED, error_result(text), error=text, allowed=(Status.QUEUED,),
                     where={"celery_task_id": job.celery_task_id}, **internal_failure(job))
        return
    await send_again(job, spec, seconds, CALLER_BUSY.format(limit=limit) if why == "share" else OTHERS_FIRST)


async def send_again(job, spec, seconds, message: str) -> bool:
    """Send the queued job's task again (in ``seconds``, or now) under a new task id; True if
    this call sent it (a cancel, a wake or a worker got there first: False)."""
    retry_id = str(uuid.uuid4())
    if not await transition(job.id, Status.QUEUED, (Status.QUEUED,), where={"celery_task_id": job.celery_task_id},
                            celery_task_id=retry_id, message=message):
        return False
    job.celery_task_id, job.message = retry_id, message
    try:
        await enqueue(job, spec, countdown=seconds)
    except Exception:
        logger.exception("queueing job %s (%s) again failed", short_id(job.id), spec.name)
        await give_back(caller_of(job), job.id, queue=queue_of(spec))
        text = f"Tool {spec.name} could not be queued again: the task broker is unreachable."
        await finish(job, Status.FAILED, error_result(text), error=text, allowed=(Status.QUEUED,),
                     where={"celery_task_id": retry_id}, **internal_failure(job))
        return False
    return True


async def release(job, worker: str = "", limit: int = 0) -> None:
    """The job holds no place among its caller's running jobs (nor a slot of ``worker``) and
    waits for none (it ended, parked, was cancelled, or did not start after all); the job whose
    turn it is now, of any caller (shares.give_back), is woken."""
    queue = queue_of(registry.tools.get(job.tool))
    first = await give_back(caller_of(job), job.id, queue=queue, worker=worker, limit=limit)
    if first:
        await wake(first, queue)


async def wake(job_id: str, queue: str) -> None:
    """The waiting job ``job_id``'s turn has come: one deferred is sent again now (its message
    would come back only after its countdown); one nobody has looked at yet is on its way in
    the broker already. An ended one (still in line) leaves it, and the next one is woken."""
    for _ in range(WAKE_TRIES):
        waiting = await load(job_id)
        spec = registry.tools.get(waiting.tool) if waiting is not None else None
        if waiting is not None and waiting.status == Status.QUEUED and spec is not None:
            if waits_for_caller(waiting) and not await _sent_now(waiting):
                await renew_wait(waiting, 0, queue)
                if await send_again(waiting, spec, None, waiting.message):
                    await async_redis().set(_woken_key(waiting), "1", px=WOKEN_MS)
            return
        # Ended (or gone) but still in line: out of it, and the next one is looked at.
        caller = caller_of(waiting) if waiting is not None else ""
        job_id = await give_back(caller, job_id, next_anyway=True, queue=queue)
        if not job_id:
            return


def _woken_key(job) -> str:
    return f"{key_base()}woken:{job.celery_task_id}"


async def _sent_now(job) -> bool:
    """The job's message is a wake's, with no countdown: on its way already (several freed
    places, or several jobs letting it go first, may name the same job)."""
    return bool(await async_redis().exists(_woken_key(job)))
