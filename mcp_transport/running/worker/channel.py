"""The job's channel (``JobChannel``): its stream, written from the worker, what a tool's Context
talks to; how a tool that asks its client parks or waits in its slot; and the event store a
worker appends with (``job_store``)."""
import asyncio
import contextlib
import json
import logging
import os
import time

from celery import signals
from channels.db import database_sync_to_async
from django.utils import timezone

from ...state import metrics, quotas
from .. import jobs
from ..jobs import following, outcome, rows
from ...state.bell import doorbell
from ...conf import get_config
from ... import tracing
from ...logs import short_id
from ...connections import async_redis, keys
from ...methods import answers
from ...methods.context import ClientRequestError
from ...protocol import jsonrpc, mrtr, task_streams
from ...protocol.jsonrpc import request_message
from ...methods.registry import ToolError
from ...methods.settling import run_until_settled
from ...storage import RedisEventStore, get_event_store
from ..streams import RequestStream, next_outbound_id, wait_for_reply

logger = logging.getLogger(__name__)

Status = jobs.Status
#: Seconds between writes of a running job's progress to its row (what the admin shows).
PROGRESS_WRITE_INTERVAL = 0.5


class JobChannel(RequestStream):
    """The job's stream, written from the worker: what a Context talks to.

    Messages of a task-augmented job carry the related-task ``_meta`` ("All requests,
    notifications, and responses related to a task MUST include the
    io.modelcontextprotocol/related-task key" -- spec 2025-11-25 basic/utilities/tasks)."""

    #: A job's notifications are stored one after the other, as its own ``emit`` does them.
    NOTIFY_AHEAD = 0

    def __init__(self, job, asked=None, answers=None, may_park=False, sync=True, worker=""):
        super().__init__(job.session_id, job.request_id, job.stream_key)
        self.job = job
        #: What earlier runs of this call asked (index -> entry) and the client's answers so far
        #: (jobs/following.py: parked jobs), and how many questions the tool has asked in this run.
        self.asked_before, self.answers, self.asked = dict(asked or {}), dict(answers or {}), 0
        self._asked_earlier = max(self.asked_before, default=-1) + 1
        #: The tool's questions end its run rather than wait in its slot (JOB_PARK_ON_ASK).
        self.may_park = may_park
        #: A sync tool asks one question at a time (its thread waits on it); an async tool's
        #: questions wait together until it waits on nothing else (run_until_parked).
        self.sync = sync
        #: The Celery worker (hostname) whose slot this run holds.
        self.worker = worker
        #: This run's questions waiting for answers (index -> entry), how many are being sent
        #: now, and an event set whenever one more waits.
        self.outstanding, self._sending, self.changed = {}, 0, asyncio.Event()
        self._held = 0
        #: The request id each asking task of a task-augmented job sent (rows.pending_request_key).
        self._request_of = {}
        #: monotonic time of the last progress notification (the tool's or a heartbeat).
        self.last_progress_at = time.monotonic()
        self.last_total, self.last_message = None, ""
        self._progress_written_at = 0.0
        self._unwritten = None
        #: A 2026-07-28 call: its questions wait as inputRequests (rows.inputs_key).
        self.modern = rows.is_2026_job(job)
        self._open_questions = 0
        #: Tasks waiting for the client's answers, on the loop thread.
        self.waiting = set()

    async def emit(self, message, final=False):
        if self.job.is_task and not self.modern and message and "params" in message:
            params = message["params"]
            params["_meta"] = {**params.get("_meta", {}), **rows.related_task_meta(self.job)}
        if message and "method" in message and "id" in message and self.job.is_task:
            # Every open question of a task, for tasks/result to send (two may be open at once).
            pending = rows.pending_request_key(self.job)
            self._request_of[asyncio.current_task()] = message["id"]
            async with async_redis().pipeline(transaction=False) as pipe:
                pipe.hset(pending, str(message["id"]), rows.json_text(message))
                pipe.expire(pending, get_config()["CLIENT_REQUEST_TIMEOUT"] + 60)
                await pipe.execute()
        if message is not None:
            fitted, _ = quotas.within_event_size(message, jsonrpc.dumps(message))
            if fitted is None:
                return None  # an oversized notification or request: dropped (counted)
            message = fitted
        return await job_store().append(self.session_id, self.stream_key, message, final=final)

    @property
    def replaying(self) -> bool:
        """The tool is redoing what an earlier run did before its last question: what it sends
        now was sent then."""
        return self.asked < self._asked_earlier

    async def notify(self, method, params):
        if self.replaying:
            return
        # Appended first: the store queues appends in call order before its first await, so
        # notifications the tool sent without waiting keep their order on the stream.
        await super().notify(method, params)

    async def request(self, method, params, key=None, answerable_ahead=False, **_options):
        """A question to the client, known by its index in the call (the tool's ask count): its
        answer if an earlier run got it, or if the call gave one ahead that it takes; else it
        parks the run (``may_park``) or waits in the slot."""
        # Registered so that a cancel stops the wait too (a sync tool blocks on it: _Handle.cancel).
        waiting = asyncio.current_task()
        self.waiting.add(waiting)
        try:
            index, self.asked = self.asked, self.asked + 1
            if index in self.answers:  # asked and answered in an earlier run
                self._check_same_question(index, method, params)
                return _answer(method, self.answers[index])
            given = await self._given_ahead(index, method, params, key) if answerable_ahead else None
            if given is not None:
                return given
            if self.may_park:
                return await self._park(index, method, params, key)
            key = key or f"{mrtr.key_prefix(method)}-{index + 1}"
            async with self._held_slot(method) as timeout:
                if self.modern:
                    return await self._ask(method, params, key, timeout)
                return await self._wait_in_slot(method, params, timeout)
        finally:
            self.waiting.discard(waiting)

    async def _given_ahead(self, index, method, params, key):
        """A 2026-07-28 call's valid answer given ahead under ``key`` (following.answer_given_ahead),
        for a question no earlier run sent: once sent, a question takes only its own answer."""
        if not self.modern or index in self.asked_before:
            return None
        return await following.answer_given_ahead(self.job, index, key, method, params, answers.fits)

    def _check_same_question(self, index, method, params):
        entry = self.asked_before.get(index)
        if entry is not None and entry.get("digest") != mrtr.question_digest(method, params):
            raise ToolError(f"The tool asked its client something else than in its earlier run ({method}, question "
                            f"{index + 1}): a background tool that asks must ask the same questions in the same "
                            f"order each time it runs, or set background={{'park': False}}.")

    async def _park(self, index, method, params, key):
        """Send the question (unless an earlier run did) and end the run until it is answered: a
        sync tool at once, an async one once it waits on nothing else (run_until_parked)."""
        entry = self.asked_before.get(index)
        if entry is None:
            self._sending += 1
            try:
                entry = await self._send_question(index, method, params, key)
            finally:
                self._sending -= 1
        else:
            self._check_same_question(index, method, params)  # still unanswered: not sent twice
        self.outstanding[index] = entry
        if self.sync:
            raise JobParked()
        self.changed.set()
        await asyncio.get_running_loop().create_future()  # until the run parks (its task is cancelled)

    async def _send_question(self, index, method, params, key):
        client, names, timeout = async_redis(), keys(), get_config()["CLIENT_REQUEST_TIMEOUT"]
        reply_id = await next_outbound_id(self.session_id, timeout)
        entry = {"id": reply_id, "digest": mrtr.question_digest(method, params),
                 "until": int((time.time() + timeout) * 1000)}
        async with client.pipeline(transaction=False) as pipe:
            # Whoever answers (streams.deliver_reply, following.deliver_inputs) finds the job by it.
            pipe.set(names.parked(self.session_id, reply_id), following.parked_value(self.job.id, index),
                     ex=timeout + following.PARKED_KEY_GRACE)
            if self.modern:  # an inputRequests entry, keyed by the question's index: stable across runs
                entry["key"] = key or f"{mrtr.key_prefix(method)}-{index + 1}"
                pipe.hset(rows.inputs_key(self.job), entry["key"],
                          rows.json_text({"id": reply_id, "method": method, "params": params}))
                pipe.expire(rows.inputs_key(self.job), timeout + 60)
            await pipe.execute()
        await self.emit(request_message(reply_id, method, self._stored(params, entry.get("key"))))
        # Written once it is sent: a run that stops in between sends it again rather than never.
        async with client.pipeline(transaction=False) as pipe:
            pipe.hset(names.job_asked(self.job.id), str(index), rows.json_text(entry))
            pipe.expire(names.job_asked(self.job.id), get_config()["STREAM_TTL"])
            await pipe.execute()
        return entry

    def _stored(self, params, key):
        """A task's question as its stream keeps it: with its inputRequests key (tasks/stream
        shows it; the copy the client is asked comes from the job's inputs, rows.inputs_key)."""
        return task_streams.with_input_key(params, key) if key and self.modern and self.job.is_task else params

    async def park(self):
        """The run ends with questions open: the job is parked (``input_required``, its deadlines
        in the call record, for following.expire_parked). An answer that came while the run was still
        going was stored without queueing the job (it was working): queue it now."""
        names, client, config = keys(), async_redis(), get_config()
        until = min(entry["until"] for entry in self.outstanding.values())
        record = names.call(self.session_id, self.stream_key)
        async with client.pipeline(transaction=False) as pipe:
            # The record's ttl ran from the call's start: a job parking near STREAM_TTL lost it
            # before its deadline (or the heartbeat wrote it again without "job"), and then no
            # one expired its questions. It now lasts at least STREAM_TTL past the deadline.
            pipe.hset(record, mapping={"job": self.job.id, "parked": len(self.outstanding), "parked_until": until})
            pipe.expire(record, config["CLIENT_REQUEST_TIMEOUT"] + config["STREAM_TTL"])
            await pipe.execute()
        await self._move(Status.INPUT_REQUIRED, Status.WORKING)
        answered = await client.hmget(names.job_answers(self.job.id), [str(index) for index in self.outstanding])
        if any(answer is not None for answer in answered):
            await following.requeue(self.job)

    @contextlib.asynccontextmanager
    async def _held_slot(self, method):
        """A question that waits in the worker slot (the tool does not park): at most
        ``held_waits_limit()`` of a worker's slots wait so at once, for JOB_HELD_ASK_TIMEOUT at
        most, so that the others keep running other clients' jobs; past it the ask fails now."""
        config = get_config()
        seconds = min(config["CLIENT_REQUEST_TIMEOUT"], config["JOB_HELD_ASK_TIMEOUT"])
        if self._held == 0 and not await following.hold_slot(self.worker, self.job.id, held_waits_limit(),
                                                              seconds + 30):
            raise ClientRequestError(method, None, text=f"{method} was not sent: too many of this worker's slots wait "
                                                        "for clients already; try again later.")
        self._held += 1
        try:
            yield seconds
        finally:
            self._held -= 1
            if self._held == 0:
                await following.release_slot(self.worker, self.job.id)

    async def _wait_in_slot(self, method, params, timeout):
        """While the tool waits on the client the job is ``input_required`` ("When the task
        receiver has messages for the requestor that are necessary to complete the task, the
        receiver SHOULD move the task to the input_required status")."""
        await self._move(Status.INPUT_REQUIRED, Status.WORKING)
        try:
            return await super().request(method, params, timeout=timeout)
        finally:
            request_id = self._request_of.pop(asyncio.current_task(), None)
            if request_id is not None:
                await async_redis().hdel(rows.pending_request_key(self.job), str(request_id))
            await self._move(Status.WORKING, Status.INPUT_REQUIRED)

    async def _ask(self, method, params, key, timeout):
        """A 2026-07-28 job's question waiting in its slot: kept as an inputRequests entry
        (written before the job turns input_required, so whoever sees the status sees the
        question) until tasks/update or the call's retry delivers its answer, from any process.
        The job stays input_required while any of its questions waits ("The task MUST stay in
        input_required until every pending request has been answered")."""
        client, names = async_redis(), keys()
        reply_id = await next_outbound_id(self.session_id, timeout)
        reply_key = names.reply(self.session_id, reply_id)
        inputs = rows.inputs_key(self.job)
        async with doorbell().listen(reply_key) as subscription:
            async with client.pipeline(transaction=False) as pipe:
                pipe.hset(inputs, key, rows.json_text({"id": reply_id, "method": method, "params": params}))
                pipe.expire(inputs, get_config()["CLIENT_REQUEST_TIMEOUT"] + 60)
                await pipe.execute()
            self._open_questions += 1
            try:
                if self._open_questions == 1:
                    await self._move(Status.INPUT_REQUIRED, Status.WORKING)
                # Wakes whoever follows the call.
                await self.emit(request_message(reply_id, method, self._stored(params, key)))
                raw = await wait_for_reply(client, reply_key, subscription, self, timeout)
            finally:
                await client.hdel(inputs, key)
                self._open_questions -= 1
                if self._open_questions == 0:
                    await self._move(Status.WORKING, Status.INPUT_REQUIRED)
        if raw is None:
            raise ClientRequestError(method, {"code": -32603, "message": "no answer in time"})
        return json.loads(raw).get("result") or {}

    async def _move(self, status, from_status):
        if await rows.transition(self.job.id, status, (from_status,)):
            self.job.status, self.job.updated_at = status, timezone.now()
            await outcome.announce(self.job)

    async def observe_progress(self, progress, total, message):
        """The tool's progress, for its row (the admin) and metrics, whether or not the client
        asked for notifications (Context.report_progress)."""
        if self.replaying:
            return
        metrics.incr("job_progress_reports")
        tracing.job_event(self.job, "progress", progress=progress, total=total, message=message)
        self.last_progress_at = time.monotonic()
        self.last_total = total if total is not None else self.last_total
        if message is not None:
            self.last_message = message
        self._unwritten = {"progress": progress, "total": total, "message": self.last_message}
        if self.last_progress_at - self._progress_written_at >= PROGRESS_WRITE_INTERVAL:
            await self.write_progress()

    async def write_progress(self):
        """The last progress into the job's row (the admin's view of it). A database that cannot
        take it now never fails the tool: the client had the notification from the event store;
        the fields wait for the next write (the next report, or ``_watch_row``'s), unless a newer
        report replaced them."""
        fields, self._unwritten = self._unwritten, None
        if fields:
            self._progress_written_at = time.monotonic()
            try:
                await _update_row(self.job.id, **fields)
            except rows.DATABASE_OUTAGE_ERRORS:
                if self._unwritten is None:
                    self._unwritten = fields
                logger.warning("writing the progress of job %s failed; kept for the next write",
                               short_id(self.job.id), exc_info=True)

    def unwritten_progress(self) -> dict:
        fields, self._unwritten = self._unwritten or {}, None
        return fields


class JobParked(BaseException):
    """The tool asked its client and its run ends here (a BaseException: a tool's ``except
    Exception`` does not swallow it); it runs again when the answer arrives."""


async def run_until_parked(coroutine, channel):
    """Run an async tool's coroutine; its value, or JobParked once it waits only for answers
    (methods/settling.py: how that is told, and that the tool's task is cancelled).

    Every question asked before the run ends is sent and registered (``channel.outstanding``):
    the job parks on all of them. A branch doing something else meanwhile (``asyncio.gather`` of
    a question and other I/O) is stopped with the run and runs again on the next one."""
    return await run_until_settled(coroutine, channel.changed, ending=JobParked,
                                   settled=lambda: _waits_only_for_answers(channel))


def _waits_only_for_answers(channel) -> bool:
    # Not while a question is still being sent (it sets ``changed`` once it is), and only with
    # questions to park on.
    return not channel._sending and bool(channel.outstanding)


_worker_concurrency = None


@signals.celeryd_after_setup.connect
def _remember_concurrency(sender=None, instance=None, **_kwargs):
    """The worker's pool size, known in its main process before it forks the pool processes."""
    global _worker_concurrency
    _worker_concurrency = getattr(instance, "concurrency", None)


def held_waits_limit() -> int:
    """How many of this worker's slots may wait for clients at once (jobs that cannot park):
    JOB_HELD_WAITS, by default all but one of its pool processes."""
    configured = get_config()["JOB_HELD_WAITS"]
    if configured is not None:
        return configured
    return max(worker_slots() - 1, 0)


def worker_slots() -> int:
    """This worker's pool processes."""
    from celery import current_app

    return int(_worker_concurrency or current_app.conf.worker_concurrency or os.cpu_count() or 1)


def caller_share(spec) -> int:
    """How many of one caller's jobs may run at once, across every worker, when this worker
    starts one of ``spec``'s: MAX_RUNNING_JOBS_PER_CALLER_BY_TOOL's, else MAX_RUNNING_JOBS_PER_CALLER,
    by default all but one of this worker's pool processes (at least one), so that one caller
    never holds every slot of a worker."""
    config = get_config()
    by_tool = config["MAX_RUNNING_JOBS_PER_CALLER_BY_TOOL"] or {}
    if spec.name in by_tool:
        return by_tool[spec.name]
    configured = config["MAX_RUNNING_JOBS_PER_CALLER"]
    return configured if configured is not None else max(worker_slots() - 1, 1)


def keeps_room(spec) -> bool:
    """The default share: a worker's last free slot is kept for a caller running no job (so two
    callers cannot take every slot from a third). A share set for the tool or for everyone is
    what the project asked for (one caller may fill a worker: a batch account's)."""
    config = get_config()
    return spec.name not in (config["MAX_RUNNING_JOBS_PER_CALLER_BY_TOOL"] or {}) and \
        config["MAX_RUNNING_JOBS_PER_CALLER"] is None


def _answer(method, reply: dict) -> dict:
    if reply.get("error") is not None:
        raise ClientRequestError(method, reply["error"])
    return reply.get("result") or {}


_job_stores = {}


def job_store():
    """The store a worker appends its jobs' events with: the configured one, except that the
    default Redis store writes to the database at once and keeps Redis at most one ring ahead.

    A worker can report faster than the web process following the stream forwards (a sync tool
    does not wait for its reports). When the follower falls more than ``maxlen`` events behind,
    Redis has trimmed what it has not read yet, and it reads those from the database
    (``read_after``). So no event may leave Redis before it is in the database: appends wait
    while a ring's worth of events is unwritten (``max_unwritten``), an event the Redis scripts
    can trim has been written. Appends do not wait for the database otherwise, which would add a
    database commit to every report's way to the client (bench/RESULTS.md, "Background tools")."""
    store = get_event_store()
    if not isinstance(store, RedisEventStore) or store.persist != "batched":
        return store
    ahead = _job_stores.get(id(store))
    if ahead is None:
        options = get_config()["EVENT_STORE"].get("OPTIONS", {})
        limits = [limit for limit in (store.maxlen, store.session_max_events) if limit]
        ahead = _job_stores[id(store)] = RedisEventStore(**{**options, "flush_interval": 0,
                                                            "max_unwritten": min(limits, default=None)})
    return ahead


@database_sync_to_async
def _update_row(job_id, **fields):
    from ...models import McpJob

    McpJob.objects.filter(id=job_id).update(updated_at=timezone.now(), **fields)
