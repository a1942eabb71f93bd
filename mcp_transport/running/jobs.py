"""Background tools: calls a Celery worker runs, and what every process may do to them.

Theory of operation. ``tools/call`` of a background tool creates an ``McpJob`` row, records the
call in Redis (as every SSE request is: control.register_call, with the job's id) and sends the
Celery task ``mcp_transport.run_job`` (worker.py). The web process answers with SSE and follows
the call's stream in the event store, like a resumed GET: whatever the worker appends (progress,
logs, requests to the client, the response) reaches the client through whichever web process
holds the stream, and a client that lost it resumes anywhere.

Exactly one answer. A job's status only moves forward, by conditional UPDATEs (``transition``):
whoever moves it to a terminal status (the worker with its result, a cancel, a time limit, a
lost worker) writes its answer, and the call record's ``done`` flag (HSETNX) makes the write
happen once even if two processes get there. A job whose worker stopped beating its heartbeat
is *lost*; whoever notices (the connection following the stream, a resume, tasks/get, or the
Celery parent process of a killed pool process) either queues it again, if the tool is declared
idempotent, or answers it with an error result.

Cancellation (``notifications/cancelled``, ``tasks/cancel``, the admin: ``cancel(job_id)``)
marks the job cancelled and ends its stream with no response ("Receivers ... SHOULD: Not send a
response for the cancelled request" -- spec 2025-11-25 basic/utilities/cancellation), tells the
worker through the control channel (the tool sees ``ctx.cancelled``), and revokes the Celery
task if no worker has started it yet (revoking a queued task is always safe; a running one is
asked first: a tool still running JOB_CANCEL_GRACE_SECONDS later has its pool process killed by
its worker, worker.stop_job). A result the tool returns after that is dropped.
"""
import asyncio
import hashlib
import json
import logging
import re
import time
import uuid
from datetime import datetime, timedelta

import redis as redis_sync
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.db import InterfaceError, OperationalError
from django.db.models import Q
from django.utils import timezone

from .. import tracing
from ..state import control, metrics, quotas
from ..methods import threads
from ..conf import get_config, redis_url
from ..connections import async_redis, keys, publish
from ..methods.content import error_result
from ..logs import short_id
from ..models import McpJob
from ..protocol import jsonrpc
from ..protocol.ids import GET_STREAM, new_token
from ..protocol.jsonrpc import notification_message, result_message
from ..methods.registry import registry
from ..storage import get_event_store

logger = logging.getLogger(__name__)

Status = McpJob.Status
RELATED_TASK = "io.modelcontextprotocol/related-task"
CANCELLED_BY_CLIENT = "Cancelled by the client."


#: The Celery task that runs a job (worker.py), as the queues and the workers know it.
RUN_JOB = "mcp_transport.run_job"


def new_job_id() -> str:
    """Unguessable (192 bits): it is also the MCP taskId, which alone reaches a task's result
    where no authorization context binds it ("receivers MUST generate cryptographically secure
    task IDs" -- spec 2025-11-25 basic/utilities/tasks)."""
    return new_token(24)


_JOB_ID = re.compile(r"[A-Za-z0-9_-]{32}")


def is_job_id(value) -> bool:
    """A string of the form ``new_job_id()`` makes."""
    return isinstance(value, str) and _JOB_ID.fullmatch(value) is not None


def cancel_key(job) -> str:
    """The job's key in ``control.running``: not its request id, which the client may reuse
    once a task-augmented call has returned its task."""
    return f"job:{job.id}"


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


# -- rows ------------------------------------------------------------------------------------

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


@database_sync_to_async
def load(job_id):
    return McpJob.objects.filter(id=job_id).first() if isinstance(job_id, str) else None


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


# -- submitting ------------------------------------------------------------------------------

async def submit(spec, arguments: dict, *, session_id: str, request_id, stream_key: str, user_id=None,
                 principal="", progress_token=None, is_task=False, ttl_ms=None, context=None, slot=None) -> McpJob:
    """Create the job and queue it; its answer will come on ``stream_key`` (``context``: what a
    2026-07-28 call brings instead of a session, ``modern_context()``; ``slot``: the request's
    place among its owner's running calls, which the job holds until it ends, quotas.py)."""
    place = quotas.take_for_job(slot)  # before anything is spent: a call's place funds one job
    job = McpJob(id=new_job_id(), session_id=session_id, user_id=user_id, principal=principal, request_id=request_id,
                 stream_key=stream_key, tool=spec.name, arguments=arguments, progress_token=progress_token,
                 is_task=is_task, ttl_ms=ttl_ms, celery_task_id=str(uuid.uuid4()),
                 context=tracing.job_context(context) or {})
    try:
        await _insert(job)
    except BaseException:
        await quotas.release_call(place)  # no job holds it: the request's own release no longer can
        raise
    await quotas.hand_to_job(place, job.id)  # before it is queued: finish() frees it
    metrics.incr("jobs_submitted")
    await control.register_call(_CallRecord(job), job=job.id)
    try:
        await enqueue(job, spec)
    except Exception:
        logger.exception("queueing job %s (%s) failed", short_id(job.id), spec.name)
        text = f"Tool {spec.name} could not be queued: the task broker is unreachable."
        await finish(job, Status.FAILED, error_result(text), error=text, **internal_failure(job))
    return job


class _CallRecord:
    """What control.register_call needs to know of a request."""

    def __init__(self, job):
        self.session_id, self.stream_key, self.request_id = job.session_id, job.stream_key, job.request_id
        self.last_beat = 0.0


async def enqueue(job, spec) -> None:
    # By name: worker.py, which registers the task, imports this module.
    from celery import current_app  # imports Celery: only where jobs are sent

    def send():
        current_app.tasks[RUN_JOB].apply_async(args=[job.id, job.session_id, job.stream_key],
                                               task_id=job.celery_task_id, **celery_options(spec))

    # kombu's publish is blocking I/O: keep it off the event loop, in the broker's own threads.
    await threads.run(threads.BROKER, threads.owner_of(job.session_id), send)


# -- answering -------------------------------------------------------------------------------

async def finish(job, status: str, result=None, error: str = "", allowed=McpJob.ACTIVE, where=None,
                 **fields) -> bool:
    """End the job with ``status`` (and its CallToolResult) unless it already ended (or is no
    longer in one of ``allowed``); True if this call ended it, and then its answer is written."""
    if not await transition(job.id, status, allowed, where=where, result=result, error=error,
                            finished_at=timezone.now(), **fields):
        return False
    job.status, job.result, job.error = status, result, error
    await quotas.release_job(job.id)
    await answer(job)
    tracing.job_ended(job)
    await metrics.record_job(status, (timezone.now() - job.created_at).total_seconds())
    return True


def outcome_status(result: dict) -> str:
    """"For tasks that wrap tool call requests, when the tool result has isError set to true,
    the task should reach failed status." -- spec 2025-11-25 basic/utilities/tasks"""
    return Status.FAILED if result.get("isError") else Status.COMPLETED


def error_text(result: dict) -> str:
    if not result.get("isError"):
        return ""
    texts = [block.get("text", "") for block in result.get("content", []) if block.get("type") == "text"]
    return " ".join(texts)[:2000]


async def answer(job) -> None:
    """Write the ended job's response on its stream (for a task: the end of its stream and a
    status notification), once, whoever calls it."""
    record = keys().call(job.session_id, job.stream_key)
    async with async_redis().pipeline(transaction=False) as pipe:
        pipe.hsetnx(record, "done", job.status)
        pipe.expire(record, get_config()["STREAM_TTL"])
        first, _ = await pipe.execute()
    if not first:
        return
    message = None
    if not job.is_task and job.status != Status.CANCELLED:
        message = result_message(job.request_id, job.result)
        message, _ = quotas.within_event_size(message, jsonrpc.dumps(message))
    await get_event_store().append(job.session_id, job.stream_key, message, final=True)
    await announce(job)


async def announce(job) -> None:
    """``notifications/tasks/status`` on the session's GET stream, for task-augmented jobs:
    "clients SHOULD expect messages to be delivered on any SSE stream, including the HTTP GET
    stream" -- spec 2025-11-25 basic/utilities/tasks"""
    if job.is_task and not is_modern(job):  # the 2026 extension has no session stream to put it on
        message = notification_message("notifications/tasks/status", task_view(job))
        await get_event_store().append(job.session_id, GET_STREAM, message)


def task_view(job) -> dict:
    """The MCP ``Task`` of a job (a queued job is ``working`` to clients: tasks begin there)."""
    status = Status.WORKING if job.status == Status.QUEUED else job.status
    view = {"taskId": job.id, "status": str(status), "createdAt": _iso(job.created_at),
            "lastUpdatedAt": _iso(job.updated_at), "ttl": job.ttl_ms,
            "pollInterval": get_config()["TASK_POLL_INTERVAL_MS"]}
    message = _status_message(job)
    if message:
        view["statusMessage"] = message
    return view


def _status_message(job):
    if job.status == Status.QUEUED:
        return "Queued: waiting for a worker."
    if job.status in (Status.FAILED, Status.CANCELLED):
        return job.error or None
    return job.message or None


def _iso(moment) -> str:
    return (moment or timezone.now()).isoformat().replace("+00:00", "Z")


# -- cancelling ------------------------------------------------------------------------------

async def acancel(job_id: str, reason: str = CANCELLED_BY_CLIENT) -> bool:
    """Cancel a job that has not ended; False if it had (or does not exist)."""
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
    return True


def cancel(job_id: str, reason: str = "Cancelled by an administrator.") -> bool:
    """Cancel a job from sync code (the admin, a shell, a Celery task): the same path as a
    client's notifications/cancelled. True if the job was running or queued."""
    return async_to_sync(acancel)(job_id, reason)


async def cancel_request(session_id: str, request_id) -> bool:
    """notifications/cancelled for a plain (not task-augmented) background call."""
    job = await _active_job_of_request(session_id, request_id)
    return job is not None and await acancel(job.id, CANCELLED_BY_CLIENT)


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


# -- lost workers ----------------------------------------------------------------------------

async def watch(session_id: str, stream_key: str, call: dict) -> bool:
    """Called when a job's stream has been quiet: True if the job turned out lost (or ended
    without its answer on the stream) and was dealt with now."""
    if "done" in call:
        return False
    if "parked" in call:  # no worker runs it: it waits for its client, for a while
        return await expire_parked(session_id, call)
    if not control.looks_dead(call):
        return False
    job = await load(call.get("job"))
    if job is None:
        return False
    stopped = call.get("stopped")
    if job.status == Status.QUEUED:
        if stopped == "database":  # a worker took it but could not start it: the database is back
            return await resend(job)
        return await expire_unclaimed(job)  # no worker yet: the broker keeps it, for a while
    if job.is_terminal:
        await answer(job)  # ended, but whoever ended it died before writing the answer
        return True
    if just_started(job):
        return False  # its worker beats right after taking it: the record read above predates that
    await worker_lost(job, hard_limit=stopped == "time_limit", database=stopped == "database")
    return True


def just_started(job) -> bool:
    """A worker took the job less than the orphan delay ago. A job that waited in the queue has
    a stale beat in its call record until its worker's first one, written just after the row
    says working: a look between the two took a fresh worker for a lost one (bench/chaos.py: a
    job queued while the worker restarted failed "worker lost" as the new worker began it)."""
    if job.started_at is None:
        return False
    return (timezone.now() - job.started_at).total_seconds() * 1000 < control.orphan_after_ms()


# -- jobs waiting for their client ---------------------------------------------------------------
# A background tool that asks its client (worker.JobChannel) does not wait in its worker slot:
# the question goes out (on the call's stream; for a 2026-07-28 job also as an inputRequests
# entry), each keyed by its index in the call (the tool's ask count), and once the tool waits
# only on answers the Celery task ends: the job is ``input_required``, "parked", with the
# questions' deadlines in its call record. Each answer (streams.deliver_reply or tasks/update and
# the retry of a 2026-07-28 call, on any web process) is stored under its index and queues the
# job again; its tool runs from its start, gets the answers it has at once, finds the questions
# still open by their index (not sent twice) and parks again until every one is answered.

def parked_value(job_id: str, index: int) -> str:
    """What ``keys().parked`` holds: the job that waits for this answer, and which of its questions."""
    return f"{job_id} {index}"


def question_digest(method: str, params: dict) -> str:
    """What a question asked: a re-run of the tool must ask the same thing at the same index."""
    canonical = json.dumps({"method": method, "params": params}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:24]


async def asked_and_answered(job_id: str):
    """The questions earlier runs of the call asked (index -> entry) and their answers so far."""
    names = keys()
    async with async_redis().pipeline(transaction=False) as pipe:
        pipe.hgetall(names.job_asked(job_id))
        pipe.hgetall(names.job_answers(job_id))
        asked, answered = await pipe.execute()
    return ({int(index): json.loads(raw) for index, raw in asked.items()},
            {int(index): json.loads(raw) for index, raw in answered.items()})


async def resume_parked(value: str, reply: dict) -> bool:
    """Store the client's answer to a parked job's question (``value``: ``parked_value()``) and
    queue the job again; True if this queued it."""
    job_id, _, index = value.partition(" ")
    job = await load(job_id)
    if job is None or not index.isdigit():
        return False
    await _record_answer(job, int(index), reply)
    await async_redis().hdel(pending_request_key(job), str(reply.get("id")))
    return await requeue(job)


async def _record_answer(job, index: int, reply: dict) -> None:
    names, ttl = keys(), get_config()["STREAM_TTL"]
    async with async_redis().pipeline(transaction=False) as pipe:
        pipe.hset(names.job_answers(job.id), str(index), _answer_value(reply))
        pipe.expire(names.job_answers(job.id), ttl)
        await pipe.execute()


def _answer_value(reply: dict) -> str:
    return dumps({key: reply.get(key) for key in ("result", "error")})


async def requeue(job) -> bool:
    """Queue again a parked job (``input_required``, its run ended) that has a new answer; True
    if this call queued it. Both the answer's process and the run that parks call it (whichever
    comes second sees the other's write), and the conditional update lets one of them through."""
    job = await load(job.id)
    spec = registry.tools.get(job.tool) if job is not None else None
    if job is None or spec is None or job.status != Status.INPUT_REQUIRED:
        return False  # still running (it looks at its answers when it parks), or ended meanwhile
    if is_modern(job) and await _questions_open(job.id):
        # "The task MUST stay in input_required until every pending request has been answered"
        # (tasks extension, partial fulfillment): a 2026-07-28 job goes on with all its answers.
        return False
    names = keys()
    async with async_redis().pipeline(transaction=False) as pipe:
        # A beat with it: a job neither parked nor beating would look lost to jobs.watch.
        pipe.hset(names.call(job.session_id, job.stream_key), "beat", int(time.time() * 1000))
        pipe.hdel(names.call(job.session_id, job.stream_key), "parked", "parked_until")
        await pipe.execute()
    retry_id = str(uuid.uuid4())
    # attempts - 1: the run that starts now goes on with the same attempt (worker.JobRun.start
    # counts one), so a lost worker's retries are not spent by the client's answers.
    if not await transition(job.id, Status.QUEUED, (Status.INPUT_REQUIRED,), where={"attempts": job.attempts},
                            celery_task_id=retry_id, attempts=job.attempts - 1,
                            message="The client answered; queued again to go on."):
        return False
    job.celery_task_id, job.status = retry_id, Status.QUEUED
    await control.beat(job.session_id, job.stream_key)
    await enqueue(job, spec)
    return True


async def _questions_open(job_id: str) -> bool:
    asked, answered = await asked_and_answered(job_id)
    return any(index not in answered for index in asked)


#: Seconds a question's parked key outlives its deadline (worker.JobChannel._send_question):
#: until then a late answer may still take it, after that nothing can.
PARKED_KEY_GRACE = 60
#: What a question nobody answered in time gets instead (the tool sees ClientRequestError).
NO_ANSWER = {"error": {"code": -32603, "message": "no answer in time"}}


async def expire_parked(session_id: str, call: dict) -> bool:
    """A parked job's questions that its client did not answer within CLIENT_REQUEST_TIMEOUT get
    the answer "no answer in time" (the tool gets ClientRequestError, as an inline wait would),
    and the client is told to stop: "the sender SHOULD issue a cancellation notification for that
    request and stop waiting for a response" -- spec 2025-11-25 basic/lifecycle (Timeouts)."""
    if int(call.get("parked_until", 0)) > time.time() * 1000:
        return False
    job = await load(call.get("job"))
    return job is not None and await expire_questions(job)


async def expire_questions(job) -> bool:
    """Answer the parked job's overdue questions "no answer in time" and queue it again; True if
    this call queued it."""
    now_ms = time.time() * 1000
    asked, answered = await asked_and_answered(job.id)
    expired = False
    for index, entry in sorted(asked.items()):
        if index in answered or entry.get("until", 0) > now_ms or not await _claim_unanswered(job, index, entry):
            continue
        await _withdraw_question(job, entry)
        await _record_answer(job, index, NO_ANSWER)
        await async_redis().hdel(pending_request_key(job), str(entry["id"]))
        expired = True
    # Every question answered but the job still parked: whoever recorded the last answer stopped
    # before queueing it, and nothing else would.
    everything_answered = bool(asked) and all(index in answered for index in asked)
    return await requeue(job) if expired or everything_answered else False


async def _claim_unanswered(job, index: int, entry: dict) -> bool:
    """Whether this call may answer the question "no answer in time": it took the question's
    parked key (no answer can take it after that), or the key has lapsed, PARKED_KEY_GRACE after
    the deadline (the cleanup runs minutes apart, CLIENT_REQUEST_TIMEOUT may exceed STREAM_TTL):
    then HSETNX of the answer lets one of two expirers through."""
    client = async_redis()
    if await client.getdel(keys().parked(job.session_id, entry["id"])):
        return True
    if time.time() * 1000 < entry.get("until", 0) + PARKED_KEY_GRACE * 1000:
        return False  # an answer (or another expirer) took it, and records it now
    return bool(await client.hsetnx(keys().job_answers(job.id), str(index), _answer_value(NO_ANSWER)))


async def _withdraw_question(job, entry: dict) -> None:
    if "key" in entry:  # a 2026-07-28 question: no longer one of the task's inputRequests
        await async_redis().hdel(inputs_key(job), entry["key"])
    else:
        cancelled = notification_message("notifications/cancelled", {"requestId": entry["id"], "reason": "timed out"})
        await get_event_store().append(job.session_id, job.stream_key, cancelled)


# -- the cleanup's sweep of waiting jobs ---------------------------------------------------------
# The cleanup looks at every input_required job whose status is older than CLIENT_REQUEST_TIMEOUT,
# in pages of SWEEP_BATCH ordered by (updated_at, id), each page after the last row of the one
# before: rows it must leave alone (a job waiting in its worker slot whose worker still beats)
# cannot hide the rows behind them, as they did when it read one unordered page of 1,000. A run
# stops after the page during which SWEEP_SECONDS ran out; the next run goes on after the last row
# it saw (a cursor in Redis), so one run's cost stays bounded and every row is reached in turn.
# Rows that turn waiting later have a newer updated_at: they come after the cursor.

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
        return await expire_questions(job)  # by the row: a re-created record may lack "job"
    return await watch(job.session_id, job.stream_key, call)  # in its slot: lost if its heart stopped


async def end_unreachable(job) -> bool:
    """Fail a waiting job whose call record is gone (it outlived STREAM_TTL, or Redis lost it:
    eviction, a restart without persistence). A running worker's heartbeat would have written
    it again, so none runs the job; and once its questions' parked keys have lapsed no answer
    can reach it: left alone it would stay input_required, holding its caller's place
    (MAX_CALLS_PER_*), for ever."""
    waited = (timezone.now() - job.updated_at).total_seconds()
    if waited < get_config()["CLIENT_REQUEST_TIMEOUT"] + PARKED_KEY_GRACE:
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


async def hold_slot(worker: str, job_id: str, limit: int, seconds: float) -> bool:
    """Count a job that waits for its client in its worker slot (one that cannot park); False,
    counting nothing, when ``limit`` of the worker's jobs wait already. A crashed process's
    entry lapses at its deadline."""
    now = time.time()
    return bool(await async_redis().eval(_HOLD_SLOT, 1, keys().held_waits(worker), now, now + seconds, job_id,
                                         limit, int(seconds * 1000) + 60000))


async def release_slot(worker: str, job_id: str) -> None:
    await async_redis().zrem(keys().held_waits(worker), job_id)


_HOLD_SLOT = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZSCORE', KEYS[1], ARGV[3]) == false and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then
  return 0
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
"""


async def end_session_jobs(session_ids) -> int:
    """Cancel the background jobs of sessions that closed (DELETE, terminate, expiry): a job
    waiting for its gone client, parked or in its slot, ends now rather than at its timeout."""
    active = await _active_jobs_of_sessions(list(session_ids))
    ended = 0
    for job_id in active:
        ended += await acancel(job_id, "Its session was closed.")
    return ended


@database_sync_to_async
def _active_jobs_of_sessions(session_ids):
    return list(McpJob.objects.filter(session_id__in=session_ids, status__in=McpJob.ACTIVE)
                .values_list("id", flat=True))


async def watch_job(job) -> None:
    call = await async_redis().hgetall(keys().call(job.session_id, job.stream_key))
    if not call:  # Redis lost the record: rebuilt from the row (``recall``)
        call = await recall(job.session_id, job.stream_key)
    if call:
        await watch(job.session_id, job.stream_key, call)


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
    after all, the worker that takes it skips it (worker.py runs only the row's task id), so the
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


async def current(job):
    """The job as it stands now (tasks/get): one that has not ended is looked at first, so that a
    task whose worker died does not stay "working" forever (watch_job)."""
    if job.is_terminal:
        return job
    await watch_job(job)
    return await load(job.id)


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


def queue_of(spec) -> str:
    """The queue a tool's jobs are sent to: its own, or Celery's default queue."""
    from celery import current_app

    queue = spec.job_options.get("queue") if spec is not None else None
    return queue or current_app.conf.task_default_queue


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


# -- 2026-07-28 calls ------------------------------------------------------------------------

MODERN_ERA = "2026-07-28"


def modern_context(client_capabilities: dict, log_level=None) -> dict:
    """What a 2026-07-28 call keeps on its job in place of a session."""
    return {"era": MODERN_ERA, "clientCapabilities": client_capabilities, "logLevel": log_level}


def is_modern(job) -> bool:
    return (job.context or {}).get("era") == MODERN_ERA


async def load_task(task_id, principal, *, session_id=None, modern=False):
    """The task ``task_id`` names, if it is a task of this era owned by ``principal`` (and, in the
    session era, of ``session_id``); else None: another's task is as unknown as one that never
    existed. Our task ids are job ids (``new_job_id``): anything else is not looked up (a NUL,
    say, which the database would refuse in a query). An expired task is returned
    (``task_expired``): the session era tells it apart."""
    job = await load(task_id) if is_job_id(task_id) else None
    if job is None or not job.is_task or is_modern(job) != modern or job.principal != principal:
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


def inputs_key(job) -> str:
    """The questions a 2026-07-28 job waits on the client for: a hash of inputRequests key ->
    ``{"id": <reply id>, "method", "params"}``. tasks/get shows them; tasks/update and the retry
    of a call deliver their answers (``deliver_inputs``)."""
    return f"{keys().prefix}:jobinput:{job.id}"


async def pending_inputs(job) -> dict:
    """The job's unanswered questions, as ``inputRequests``."""
    entries = await async_redis().hgetall(inputs_key(job))
    return {key: {"method": entry["method"], "params": entry["params"]}
            for key, entry in ((key, json.loads(raw)) for key, raw in sorted(entries.items()))}


async def deliver_inputs(job, responses: dict) -> list:
    """Hand the worker the answers to the questions it asked (keys it did not ask are ignored:
    "The server SHOULD ignore the extra keys"); the keys answered now. A key is claimed with
    HDEL, so of two concurrent deliveries exactly one reaches the tool."""
    client, answered = async_redis(), []
    entries = await client.hgetall(inputs_key(job)) if responses else {}
    for key, value in responses.items():
        raw = entries.get(key)
        if raw is None or not await client.hdel(inputs_key(job), key):
            continue
        # What streams.deliver_reply does (not imported: streams imports this module).
        reply_id = json.loads(raw)["id"]
        reply = {"id": reply_id, "result": value}
        reply_key = keys().reply(job.session_id, reply_id)
        async with client.pipeline(transaction=False) as pipe:
            pipe.set(reply_key, dumps(reply), ex=get_config()["CLIENT_REQUEST_TIMEOUT"] + 60)
            publish(pipe, reply_key, "1")
            pipe.getdel(keys().parked(job.session_id, reply_id))  # a parked job's question
            _, _, parked = await pipe.execute()
        if parked is not None:
            await resume_parked(parked, reply)
        answered.append(key)
    return answered


def related_task_meta(job) -> dict:
    return {RELATED_TASK: {"taskId": job.id}}


def pending_request_key(job) -> str:
    """The requests a task-augmented job waits on the client for (a hash: request id -> message),
    so tasks/result can send them."""
    return f"{keys().prefix}:jobpending:{job.id}"


def dumps(message) -> str:
    return json.dumps(message, separators=(",", ":"))
