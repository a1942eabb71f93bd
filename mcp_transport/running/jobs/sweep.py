"""The cleanup's sweep of waiting jobs.

The cleanup looks at every input_required job whose status is older than CLIENT_REQUEST_TIMEOUT,
in pages of SWEEP_BATCH ordered by (updated_at, id), each page after the last row of the one
before: rows it must leave alone (a job waiting in its worker slot whose worker still beats)
cannot hide the rows behind them, as they did when it read one unordered page of 1,000. A run
stops after the page during which SWEEP_SECONDS ran out; the next run goes on after the last row
it saw (a cursor in Redis), so one run's cost stays bounded and every row is reached in turn.
Rows that turn waiting later have a newer updated_at: they come after the cursor.
"""
import logging
import time
from datetime import datetime, timedelta

from channels.db import database_sync_to_async
from django.db.models import Q
from django.utils import timezone

from ...conf import get_config
from ...connections import async_redis, keys
from ...methods.content import error_result
from ...logs import short_id
from ...models import McpJob
from . import following
from .outcome import finish
from .rows import Status, internal_failure
from .settling import watch

logger = logging.getLogger(__name__)


#: Waiting jobs read per query by the cleanup.
SWEEP_BATCH = 1000
#: Seconds one cleanup run spends on waiting jobs (it finishes the page it is on).
SWEEP_SECONDS = 30.0


async def expire_parked_jobs() -> int:
    """The cleanup's look at the jobs waiting for their client (see above): a 2026-07-28 call
    whose client never retries has nobody following its stream to notice; how many it moved."""
    before = timezone.now() - timedelta(seconds=get_config()["CLIENT_REQUEST_TIMEOUT"])
    stop_at, after, moved = time.monotonic() + SWEEP_SECONDS, await _sweep_cursor(), 0
    while True:
        rows = await _jobs_waiting_since(before, after)
        moved += await _sweep(rows)
        if len(rows) < SWEEP_BATCH:
            await _save_sweep_cursor(None)  # all seen: the next run starts from the oldest again
            return moved
        after = (rows[-1].updated_at, rows[-1].id)
        if time.monotonic() >= stop_at:
            await _save_sweep_cursor(after)
            return moved


async def _sweep(rows) -> int:
    async with async_redis().pipeline(transaction=False) as pipe:
        for job in rows:
            pipe.hgetall(keys().call(job.session_id, job.stream_key))
        calls = await pipe.execute()
    moved = 0
    for job, call in zip(rows, calls):
        try:
            moved += await _sweep_one(job, call)
        except Exception:  # one row's trouble must not stop the cleanup for every row after it
            logger.exception("the cleanup could not look at waiting job %s", short_id(job.id))
    return moved


async def _sweep_one(job, call: dict) -> bool:
    if not call:
        return await end_unreachable(job)
    if "parked" in call and "done" not in call:
        return await following.expire_questions(job)  # by the row: a re-created record may lack "job"
    return await watch(job.session_id, job.stream_key, call)  # in its slot: lost if its heart stopped


async def end_unreachable(job) -> bool:
    """Fail a waiting job whose call record is gone (it outlived STREAM_TTL, or Redis lost it:
    eviction, a restart without persistence). A running worker's heartbeat would have written
    it again, so none runs the job; and once its questions' parked keys have lapsed no answer
    can reach it: left alone it would stay input_required, holding its caller's place
    (MAX_CALLS_PER_*), for ever."""
    waited = (timezone.now() - job.updated_at).total_seconds()
    # Read from its module, not copied: setting following.PARKED_KEY_GRACE changes it here too.
    if waited < get_config()["CLIENT_REQUEST_TIMEOUT"] + following.PARKED_KEY_GRACE:
        return False  # a late answer may still find it and queue it again
    text = (f"Tool {job.tool} waited for its client, and the server lost the call's record (it outlived "
            f"STREAM_TTL, or Redis lost it): no answer can reach the call any more.")
    return await finish(job, Status.FAILED, error_result(text), error=text, allowed=(Status.INPUT_REQUIRED,),
                        where={"updated_at": job.updated_at}, **internal_failure(job))


async def _sweep_cursor():
    raw = await async_redis().get(keys().waiting_sweep())
    if not raw:
        return None
    moment, _, job_id = raw.partition(" ")
    return datetime.fromisoformat(moment), job_id


async def _save_sweep_cursor(after) -> None:
    if after is None:
        await async_redis().delete(keys().waiting_sweep())
    else:  # a day: a cursor nobody comes back to goes by itself
        await async_redis().set(keys().waiting_sweep(), f"{after[0].isoformat()} {after[1]}", ex=86400)


@database_sync_to_async
def _jobs_waiting_since(before, after=None) -> list:
    rows = McpJob.objects.filter(status=Status.INPUT_REQUIRED, updated_at__lt=before)
    if after is not None:
        moment, job_id = after
        rows = rows.filter(Q(updated_at__gt=moment) | Q(updated_at=moment, id__gt=job_id))
    return list(rows.order_by("updated_at", "id")[:SWEEP_BATCH])
