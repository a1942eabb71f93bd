"""Jobs that may not start yet (shares.py): back to the queue without taking a worker slot, and
woken when their turn comes.

A deferred job stays ``queued`` (tasks/get says why), its Celery task is sent again with a
countdown under a new task id (the row's ``celery_task_id`` names the one message that may run
it, as for ``lost.resend``), and its row's ``updated_at`` moves, so JOB_QUEUE_TIMEOUT never takes
it for a job no worker takes. The countdown grows with the time the job has waited
(``defer_seconds``: 1 s to DEFER_MAX_SECONDS), so a long line costs a few messages a minute,
not a loop; the usual way out is sooner: a job that ends (or parks, or is cancelled) gives its
place back and the job whose turn it is, of whichever caller, is sent again at once
(``release``); so is the job another one let go first (``wake``).
"""
import logging
import uuid

from django.utils import timezone

from ...connections import async_redis
from ...logs import short_id
from ...methods.content import error_result
from ...methods.registry import registry
from .answers import CALLER_BUSY, OTHERS_FIRST, finish, waits_for_caller
from .limits import queue_of
from .modern import internal_failure, task_expired
from .rows import Status, load, transition
from .shares import _base, caller_of, give_back, renew_wait
from .submitting import enqueue

logger = logging.getLogger(__name__)

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
    return f"{_base()}woken:{job.celery_task_id}"


async def _sent_now(job) -> bool:
    """The job's message is a wake's, with no countdown: on its way already (several freed
    places, or several jobs letting it go first, may name the same job)."""
    return bool(await async_redis().exists(_woken_key(job)))
