"""Jobs over their caller's share (shares.py): back to the queue without taking a worker slot,
and woken when one of their caller's jobs gives its place back.

A deferred job stays ``queued`` (tasks/get says why), its Celery task is sent again with a
countdown under a new task id (the row's ``celery_task_id`` names the one message that may run
it, as for ``lost.resend``), and its row's ``updated_at`` moves, so JOB_QUEUE_TIMEOUT never takes
it for a job no worker takes. The countdown grows with the time the job has waited
(``defer_seconds``: 1 s to DEFER_MAX_SECONDS), so a long line costs a few messages a minute,
not a loop; the usual way out is sooner: a job that ends (or parks, or is cancelled) gives its
place back and the first job of its caller's line is sent again at once (``release``).
"""
import logging
import uuid

from django.utils import timezone

from ...logs import short_id
from ...methods.content import error_result
from ...methods.registry import registry
from .answers import CALLER_BUSY, finish
from .modern import internal_failure, task_expired
from .rows import Status, load, transition
from .shares import caller_of, give_back, renew_wait
from .submitting import enqueue

logger = logging.getLogger(__name__)

#: The longest countdown of a deferred job (seconds): a fallback, since a place given back wakes
#: the first waiting job at once.
DEFER_MAX_SECONDS = 30
#: How many ended jobs at the head of a caller's line a wake skips before it gives up.
WAKE_TRIES = 5


def defer_seconds(job) -> float:
    """When to look at a job over its caller's share again: 1 s at first, a quarter of the time
    it has waited later, DEFER_MAX_SECONDS at most."""
    waited = (timezone.now() - job.created_at).total_seconds()
    return min(max(1.0, waited / 4), DEFER_MAX_SECONDS)


async def defer(job, spec, limit: int, seconds: float) -> None:
    """The job waits for a place among its caller's ``limit`` running jobs: sent again in
    ``seconds`` (it is in its caller's line already: shares.take_place). A task whose ttl has
    passed meanwhile ends instead: nobody could read its result."""
    if job.is_task and task_expired(job):
        await give_back(caller_of(job), job.id)
        text = f"Tool {job.tool} did not start within its task's ttl: its caller's other jobs held every place."
        await finish(job, Status.FAILED, error_result(text), error=text, allowed=(Status.QUEUED,),
                     where={"celery_task_id": job.celery_task_id}, **internal_failure(job))
        return
    await send_again(job, spec, seconds, CALLER_BUSY.format(limit=limit))


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
        await give_back(caller_of(job), job.id)
        text = f"Tool {spec.name} could not be queued again: the task broker is unreachable."
        await finish(job, Status.FAILED, error_result(text), error=text, allowed=(Status.QUEUED,),
                     where={"celery_task_id": retry_id}, **internal_failure(job))
        return False
    return True


async def release(job) -> None:
    """The job holds no place among its caller's running jobs and waits for none (it ended,
    parked, was cancelled, or did not start after all); the first job of its caller's line, if
    a place came free, is sent again now."""
    caller = caller_of(job)
    first = await give_back(caller, job.id)
    for _ in range(WAKE_TRIES):
        if not first:
            return
        waiting = await load(first)
        spec = registry.tools.get(waiting.tool) if waiting is not None else None
        if waiting is not None and waiting.status == Status.QUEUED and spec is not None:
            await renew_wait(waiting, 0)
            await send_again(waiting, spec, None, waiting.message)
            return
        # Ended (or gone) but still in line: out of it, and the next one is looked at.
        first = await give_back(caller, first, next_anyway=True)
