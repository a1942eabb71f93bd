"""The worker side of background tools: the Celery task that runs a job, and the Context it gets.

A Celery pool process runs tools in its own thread, which has no event loop. The event store,
the doorbells and the control channel are asyncio code, so each process keeps one event loop
in a daemon thread (``bridge()``): a tool's Context hands every report to it and waits for it
to be stored, as a sync tool's Context does with the web process's loop. Through that loop the
process also subscribes to the control channel (cancellations reach the tool as
``ctx.cancelled``) and beats the heartbeat of the jobs it runs (a job whose heart stops is
lost: jobs.py).

Celery does the rest: routing (``queue``), soft and hard time limits per tool, acks_late. The
soft limit raises SoftTimeLimitExceeded in the tool and becomes an error result; the hard limit
and a killed pool process are reported by Celery's parent process through ``task_failure``.
"""
import asyncio
import collections
import concurrent.futures
import contextlib
import inspect
import json
import logging
import math
import os
import threading
import time

from asgiref.sync import SyncToAsync
from celery import shared_task, signals
from celery.worker import state as worker_state
from celery.worker.control import control_command, ok
from celery.exceptions import SoftTimeLimitExceeded, TimeLimitExceeded
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone

from ..state import control, metrics, quotas, sessions
from . import jobs
from ..state.bell import doorbell
from ..conf import get_config
from .. import tracing
from ..logs import short_id
from ..connections import async_redis, keys
from ..methods.content import error_result
from ..methods.context import ClientCapabilityError, ClientRequestError, Context, ToolCancelled, make_sync_method
from ..protocol import jsonrpc, mrtr
from ..protocol.jsonrpc import request_message
from ..methods.registry import ArgumentError, ToolError, registry
from ..methods.settling import run_until_settled
from ..storage import RedisEventStore, get_event_store
from .streams import RequestStream, next_outbound_id, wait_for_reply

logger = logging.getLogger(__name__)

Status = jobs.Status
#: Seconds between writes of a running job's progress to its row (what the admin shows).
PROGRESS_WRITE_INTERVAL = 0.5


class LoopThread:
    """An event loop running in a daemon thread; ``run(coro)`` waits for a coroutine on it."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="mcp-jobs-loop", daemon=True)
        self.thread.start()

    def run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def submit(self, coroutine) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)


_bridge = None
_bridge_lock = threading.Lock()


def bridge() -> LoopThread:
    """This process's loop thread (a forked pool process starts its own)."""
    global _bridge
    with _bridge_lock:
        if _bridge is None:
            _bridge = LoopThread()
        return _bridge


def _forget_threads_after_fork():
    """Threads do not survive a fork: Celery's parent process may have started the loop thread
    (and asgiref's database thread) before it forks a new pool process, whose copies of them
    would wait forever for threads that are not there."""
    global _bridge, _bridge_lock
    _bridge, _bridge_lock = None, threading.Lock()
    SyncToAsync.single_thread_executor = concurrent.futures.ThreadPoolExecutor(max_workers=1)


os.register_at_fork(after_in_child=_forget_threads_after_fork)


# -- the job's channel and context -------------------------------------------------------------

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
        #: (jobs.py: parked jobs), and how many questions the tool has asked in this run.
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
        #: The request id each asking task of a task-augmented job sent (jobs.pending_request_key).
        self._request_of = {}
        #: monotonic time of the last progress notification (the tool's or a heartbeat).
        self.last_progress_at = time.monotonic()
        self.last_total, self.last_message = None, ""
        self._progress_written_at = 0.0
        self._unwritten = None
        #: A 2026-07-28 call: its questions wait as inputRequests (jobs.inputs_key).
        self.modern = jobs.is_modern(job)
        self._open_questions = 0
        #: Tasks waiting for the client's answers, on the loop thread.
        self.waiting = set()

    async def emit(self, message, final=False):
        if self.job.is_task and not self.modern and message and "params" in message:
            params = message["params"]
            params["_meta"] = {**params.get("_meta", {}), **jobs.related_task_meta(self.job)}
        if message and "method" in message and "id" in message and self.job.is_task:
            # Every open question of a task, for tasks/result to send (two may be open at once).
            pending = jobs.pending_request_key(self.job)
            self._request_of[asyncio.current_task()] = message["id"]
            async with async_redis().pipeline(transaction=False) as pipe:
                pipe.hset(pending, str(message["id"]), jobs.dumps(message))
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

    async def request(self, method, params, key=None, **_options):
        """A question to the client, known by its index in the call (the tool's ask count): its
        answer if an earlier run got it; else it parks the run (``may_park``) or waits in the slot."""
        # Registered so that a cancel stops the wait too (a sync tool blocks on it: _Handle.cancel).
        waiting = asyncio.current_task()
        self.waiting.add(waiting)
        try:
            index, self.asked = self.asked, self.asked + 1
            if index in self.answers:  # asked and answered in an earlier run
                self._check_same_question(index, method, params)
                return _answer(method, self.answers[index])
            if self.may_park:
                return await self._park(index, method, params, key)
            key = key or f"{mrtr.key_prefix(method)}-{index + 1}"
            async with self._held_slot(method) as timeout:
                if self.modern:
                    return await self._ask(method, params, key, timeout)
                return await self._wait_in_slot(method, params, timeout)
        finally:
            self.waiting.discard(waiting)

    def _check_same_question(self, index, method, params):
        entry = self.asked_before.get(index)
        if entry is not None and entry.get("digest") != jobs.question_digest(method, params):
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
        reply_id = await next_outbound_id(self.session_id)
        entry = {"id": reply_id, "digest": jobs.question_digest(method, params),
                 "until": int((time.time() + timeout) * 1000)}
        async with client.pipeline(transaction=False) as pipe:
            # Whoever answers (streams.deliver_reply, jobs.deliver_inputs) finds the job by it.
            pipe.set(names.parked(self.session_id, reply_id), jobs.parked_value(self.job.id, index),
                     ex=timeout + jobs.PARKED_KEY_GRACE)
            if self.modern:  # an inputRequests entry, keyed by the question's index: stable across runs
                entry["key"] = key or f"{mrtr.key_prefix(method)}-{index + 1}"
                pipe.hset(jobs.inputs_key(self.job), entry["key"],
                          jobs.dumps({"id": reply_id, "method": method, "params": params}))
                pipe.expire(jobs.inputs_key(self.job), timeout + 60)
            await pipe.execute()
        await self.emit(request_message(reply_id, method, params))
        # Written once it is sent: a run that stops in between sends it again rather than never.
        async with client.pipeline(transaction=False) as pipe:
            pipe.hset(names.job_asked(self.job.id), str(index), jobs.dumps(entry))
            pipe.expire(names.job_asked(self.job.id), get_config()["STREAM_TTL"])
            await pipe.execute()
        return entry

    async def park(self):
        """The run ends with questions open: the job is parked (``input_required``, its deadlines
        in the call record, for jobs.expire_parked). An answer that came while the run was still
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
            await jobs.requeue(self.job)

    @contextlib.asynccontextmanager
    async def _held_slot(self, method):
        """A question that waits in the worker slot (the tool does not park): at most
        ``held_waits_limit()`` of a worker's slots wait so at once, for JOB_HELD_ASK_TIMEOUT at
        most, so that the others keep running other clients' jobs; past it the ask fails now."""
        config = get_config()
        seconds = min(config["CLIENT_REQUEST_TIMEOUT"], config["JOB_HELD_ASK_TIMEOUT"])
        if self._held == 0 and not await jobs.hold_slot(self.worker, self.job.id, held_waits_limit(), seconds + 30):
            raise ClientRequestError(method, None, text=f"{method} was not sent: too many of this worker's slots wait "
                                                        "for clients already; try again later.")
        self._held += 1
        try:
            yield seconds
        finally:
            self._held -= 1
            if self._held == 0:
                await jobs.release_slot(self.worker, self.job.id)

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
                await async_redis().hdel(jobs.pending_request_key(self.job), str(request_id))
            await self._move(Status.WORKING, Status.INPUT_REQUIRED)

    async def _ask(self, method, params, key, timeout):
        """A 2026-07-28 job's question waiting in its slot: kept as an inputRequests entry
        (written before the job turns input_required, so whoever sees the status sees the
        question) until tasks/update or the call's retry delivers its answer, from any process.
        The job stays input_required while any of its questions waits ("The task MUST stay in
        input_required until every pending request has been answered")."""
        client, names = async_redis(), keys()
        reply_id = await next_outbound_id(self.session_id)
        reply_key = names.reply(self.session_id, reply_id)
        inputs = jobs.inputs_key(self.job)
        async with doorbell().listen(reply_key) as subscription:
            async with client.pipeline(transaction=False) as pipe:
                pipe.hset(inputs, key, jobs.dumps({"id": reply_id, "method": method, "params": params}))
                pipe.expire(inputs, get_config()["CLIENT_REQUEST_TIMEOUT"] + 60)
                await pipe.execute()
            self._open_questions += 1
            try:
                if self._open_questions == 1:
                    await self._move(Status.INPUT_REQUIRED, Status.WORKING)
                await self.emit(request_message(reply_id, method, params))  # wakes whoever follows the call
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
        if await jobs.transition(self.job.id, status, (from_status,)):
            self.job.status, self.job.updated_at = status, timezone.now()
            await jobs.announce(self.job)

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
            except jobs.DATABASE_OUTAGE_ERRORS:
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
    from celery import current_app

    slots = _worker_concurrency or current_app.conf.worker_concurrency or os.cpu_count() or 1
    return max(int(slots) - 1, 0)


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
    from ..models import McpJob

    McpJob.objects.filter(id=job_id).update(updated_at=timezone.now(), **fields)


#: Notifications a sync tool may have on their way before its next report waits for them.
MAX_UNSENT_NOTIFICATIONS = 100


def _send_notification(method_name):
    """A Context notification method that hands its work to the loop thread and returns at once:
    the tool does not wait a Redis round trip per report. The loop runs them in order, and
    requests to the client and the job's answer queue behind them."""
    async_method = getattr(Context, method_name)

    def method(self, *args, **kwargs):
        pending = self._unsent
        while pending and (pending[0].done() or len(pending) >= MAX_UNSENT_NOTIFICATIONS):
            pending.popleft().result()  # raises what a failed send raised; waits when too many
        pending.append(bridge().submit(async_method(self, *args, **kwargs)))
    method.__name__ = method_name
    method.__doc__ = async_method.__doc__
    return method


class WorkerContext(Context):
    """The Context of a sync tool in a worker: each method runs on the process's loop thread;
    notifications (progress, logs) without waiting for them to be stored."""

    for _name in ("report_progress", "log", "debug", "info", "warning", "error"):
        locals()[_name] = _send_notification(_name)
    for _name in ("send_request", "sample", "elicit", "list_roots", "close_stream"):
        locals()[_name] = make_sync_method(_name, lambda coroutine: bridge().run(coroutine))
    del _name

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._unsent = collections.deque()

    def wait_unsent(self):
        while self._unsent:
            try:
                self._unsent.popleft().result()
            except Exception:
                logger.warning("a notification of job %s was not stored", self.request_id, exc_info=True)


class _Handle:
    """What ``control.cancel_local`` cancels: the coroutine of an async tool, if it runs one, and
    the waits of its channel for the client's answers (a sync tool blocks on them)."""

    future = None

    def __init__(self, channel):
        self.channel = channel

    def cancel(self):
        if self.future is not None:
            self.future.cancel()
        for waiting in list(self.channel.waiting):  # from the loop thread or the tool's
            waiting.get_loop().call_soon_threadsafe(waiting.cancel)


# -- running a job ---------------------------------------------------------------------------

@shared_task(bind=True, name="mcp_transport.run_job", acks_late=True, ignore_result=True)
def run_job(self, job_id: str, session_id: str = "", stream_key: str = ""):
    """Run one background tool call (jobs.submit sends it)."""
    job = bridge().run(jobs.riding_out_database(jobs.load, job_id))
    if job is None or job.status != Status.QUEUED or job.celery_task_id != self.request.id:
        return  # cancelled or ended before it started, or a stale redelivery
    spec = registry.tools.get(job.tool)
    if spec is None:
        text = f"Tool {job.tool} is not registered in this worker."
        bridge().run(jobs.finish(job, Status.FAILED, error_result(text), error=text, **jobs.internal_failure(job)))
        return
    asked, answers = bridge().run(jobs.asked_and_answered(job.id))
    run = JobRun(job, spec, asked, answers, worker=self.request.hostname or "")
    # The limits the web process sent with the task (jobs.celery_options), not this process's settings.
    run.soft_time_limit = (self.request.timelimit or (None, None))[1] or run.soft_time_limit
    run.execute(worker=f"{self.request.hostname}:{os.getpid()}")


#: The outcome of a tool that did not return or raise an Exception (its process is stopping).
_UNFINISHED = object()
#: The outcome of a run that ended to wait for the client's answer (JobChannel.park).
_PARKED = object()


class JobRun:
    def __init__(self, job, spec, asked=None, answers=None, worker=""):
        self.job, self.spec = job, spec
        may_park = get_config()["JOB_PARK_ON_ASK"] and spec.job_options.get("park", True)
        self.channel = JobChannel(job, asked, answers, may_park=bool(may_park),
                                  sync=not inspect.iscoroutinefunction(spec.func), worker=worker)
        self.handle = _Handle(self.channel)
        self.context = None
        self._watchers = []
        #: The tool did not end on its own terms (a crash or a time limit), not "it reported an error".
        self.failed_internally = False
        #: Seconds of the soft time limit Celery runs this job with.
        self.soft_time_limit = jobs.time_limits(spec)[0]

    def execute(self, worker: str) -> None:
        with tracing.job_span(self.job):  # a child of its call's span, wherever that ran
            self._execute(worker)

    def _execute(self, worker: str) -> None:
        if not bridge().run(self.start(worker)):
            return
        result, _current.run = _UNFINISHED, self
        try:
            result = self.outcome()
        finally:
            _current.run = None
            if isinstance(self.context, WorkerContext):
                self.context.wait_unsent()  # the answer comes after every report
            bridge().run(self.stop(result))

    async def start(self, worker) -> bool:
        await control.ensure_listening()  # subscribed before the job can be seen as running
        # Reachable by a cancel before it can be seen as working: a cancel sent from then on
        # (jobs.acancel publishes after its status change) finds it, with nothing left to chance.
        running_key = (self.job.session_id, jobs.cancel_key(self.job))
        control.running[running_key] = (self.channel, self.handle)
        started = False
        try:
            started = await jobs.riding_out_database(
                jobs.transition, self.job.id, Status.WORKING, (Status.QUEUED,),
                where={"celery_task_id": self.job.celery_task_id}, started_at=timezone.now(),
                attempts=self.job.attempts + 1, worker=worker, message="")
        finally:
            if not started:
                control.running.pop(running_key, None)
        if not started:
            return False
        self.job.status, self.job.attempts = Status.WORKING, self.job.attempts + 1
        await control.beat(self.job.session_id, self.job.stream_key)
        self.context = await self._make_context()
        if self.job.attempts > 1 or self.channel.asked_before:
            self.context._last_progress = await self._progress_sent()
        loop = asyncio.get_running_loop()
        self._watchers = [loop.create_task(self._progress_heartbeat()), loop.create_task(self._watch_row())]
        await jobs.announce(self.job)
        return True

    async def _make_context(self):
        context_class = Context if inspect.iscoroutinefunction(self.spec.func) else WorkerContext
        if self.channel.modern:  # no session: the call brought its capabilities and log level
            capabilities = self.job.context.get("clientCapabilities") or {}
            log_level = self.job.context.get("logLevel") or "emergency"
        else:
            session = await sessions.load(self.job.session_id)
            capabilities = session.client_capabilities if session else {}
            log_level = session.log_level if session else get_config()["DEFAULT_LOG_LEVEL"]
        return context_class(channel=self.channel, session_id=self.job.session_id, request_id=self.job.request_id,
                             progress_token=self.job.progress_token, user=await _user(self.job.user_id),
                             client_capabilities=capabilities, log_level=log_level)

    async def _progress_sent(self):
        """The last progress value an earlier attempt sent: a retry continues above it, since
        "The progress value MUST increase with each notification"."""
        events = await get_event_store().read_after(self.job.session_id, self.job.stream_key, "0-0")
        values = [event.message["params"]["progress"] for event in events
                  if event.message and event.message.get("method") == "notifications/progress"]
        return max(values, default=None)

    def call(self):
        kwargs = self.spec.bind(self.job.arguments)
        if self.spec.context_param:
            kwargs[self.spec.context_param] = self.context
        if inspect.iscoroutinefunction(self.spec.func):
            coroutine = self.spec.func(**kwargs)
            if self.channel.may_park:
                coroutine = run_until_parked(coroutine, self.channel)
            self.handle.future = bridge().submit(coroutine)
            if self.channel.cancelled:  # cancelled before its coroutine existed (start() registers it first)
                self.handle.future.cancel()
            return self.handle.future.result()
        return (self.spec.celery_task or self.spec.func)(**kwargs)

    def outcome(self):
        """The CallToolResult, or None when the call was cancelled."""
        name = self.spec.name
        try:
            value = self.call()
        except JobParked:
            return _PARKED
        except SoftTimeLimitExceeded:
            self.handle.cancel()
            self.failed_internally = True
            return error_result(f"Tool {name} exceeded its soft time limit of {self.soft_time_limit} s.")
        except (ToolCancelled, concurrent.futures.CancelledError):
            if self.channel.cancelled:
                return None
            return error_result(f"Tool {name} was stopped.")
        except (ToolError, ClientCapabilityError, ClientRequestError, ArgumentError) as exc:
            return error_result(str(exc))
        except Exception as exc:
            logger.exception("background tool %s raised", name)
            self.failed_internally = True
            return error_result(f"Tool {name} failed: {type(exc).__name__}.")
        return None if self.channel.cancelled else self.spec.to_result(value)

    async def stop(self, result) -> None:
        for watcher in self._watchers:
            watcher.cancel()
        progress = self.channel.unwritten_progress()
        if result is _PARKED or result is _UNFINISHED:
            control.running.pop((self.job.session_id, jobs.cancel_key(self.job)), None)
        if result is _PARKED:
            await job_store().flush()  # the questions are in the database before the slot is free
            await self.channel.park()
            return
        if result is _UNFINISHED:
            # The process is being stopped (Celery's hard time limit sends SIGTERM first, then
            # SIGKILL): its heart stops here, and Celery's main process says why (jobs.watch).
            return
        try:
            # The heart beats until the job's end is written: while the database is away (and
            # the write retries) nobody may take this worker for lost.
            await jobs.riding_out_database(self._finish, result, progress)
        finally:
            control.running.pop((self.job.session_id, jobs.cancel_key(self.job)), None)
        for store in {job_store(), get_event_store()}:  # an ended job's events are in the database
            await store.flush()

    async def _finish(self, result, progress):
        if result is None:
            await jobs.finish(self.job, Status.CANCELLED, error=jobs.CANCELLED_BY_CLIENT, **progress)
        else:
            if self.failed_internally:
                progress = {**progress, **jobs.internal_failure(self.job)}
            await jobs.finish(self.job, jobs.outcome_status(result), result, error=jobs.error_text(result), **progress)

    async def _progress_heartbeat(self):
        """Progress every PROGRESS_HEARTBEAT_SECONDS while the tool reports none, so clients with
        short request timeouts keep waiting. "The progress value MUST increase with each
        notification": each beat adds the smallest step a float can take, which any later
        progress of the tool's own still exceeds."""
        every = get_config()["PROGRESS_HEARTBEAT_SECONDS"]
        if not every or self.context.progress_token is None:
            return
        while True:
            silent = time.monotonic() - self.channel.last_progress_at
            if silent < every:
                await asyncio.sleep(every - silent)
                continue
            last = self.context._last_progress
            value = 0.0 if last is None else math.nextafter(last, math.inf)
            try:
                await Context.report_progress(self.context, value, self.channel.last_total)
            except Exception:
                logger.warning("progress heartbeat of job %s failed", short_id(self.job.id), exc_info=True)
                self.channel.last_progress_at = time.monotonic()

    async def _watch_row(self):
        """A cancel whose control message this process missed still reaches the tool."""
        while True:
            await asyncio.sleep(control.heartbeat_seconds())
            try:
                row = await jobs.load(self.job.id)
                if row is not None and row.status == Status.CANCELLED:
                    self.channel.cancelled = True
                    self.handle.cancel()
                await self.channel.write_progress()
            except Exception:
                logger.warning("watching job %s failed", short_id(self.job.id), exc_info=True)


@database_sync_to_async
def _user(user_id):
    if user_id is None:
        return AnonymousUser()
    return get_user_model().objects.filter(pk=user_id).first() or AnonymousUser()


_current = threading.local()


def job_context():
    """The Context of the background tool this thread runs (for an exposed Celery task that
    wants to report progress without a ``ctx`` parameter), or None outside a job."""
    run = getattr(_current, "run", None)
    return run.context if run is not None else None


# -- what Celery's parent process sees -----------------------------------------------------------

@signals.task_failure.connect
def _job_failed(sender=None, task_id=None, exception=None, args=None, **_kwargs):
    """A pool process running a job stopped: Celery's hard time limit, or it was killed. This
    runs in Celery's main process (jobs.mark_stopped says why it must stay simple)."""
    if getattr(sender, "name", None) != run_job.name or not args or len(args) < 3:
        return
    if isinstance(exception, TimeLimitExceeded):
        reason = "time_limit"
    elif isinstance(exception, jobs.DATABASE_OUTAGE_ERRORS):
        reason = "database"  # the job's start or end could not be written (jobs.riding_out_database)
    else:
        reason = "lost"
    try:
        jobs.mark_stopped(args[1], args[2], reason)
    except Exception:  # the job's heartbeat stops anyway
        logger.exception("reporting the stopped job %s failed", args[0])


@control_command(args=[("task_id", str), ("grace", float)], signature="<task_id> <grace>")
def mcp_stop_job(state, task_id, grace=0.0, **_kwargs):
    """Kill the pool process running the cancelled job ``task_id`` if it still runs it ``grace``
    seconds from now (jobs._stop_running broadcasts it to every worker).

    Runs in Celery's main process, whose timer does not depend on the pool process: a tool
    blocked in a C call that holds the GIL stops too, which no signal handler or thread of its
    own process could make it do. It is Celery's ``revoke(terminate=True, signal="SIGKILL")``
    delayed, and only for a task still active then: one that stopped on its own (it was told
    through the control channel first) has its slot back already, and a terminate sent at once
    could hit the next task of a process that had just moved on. The pool starts a new process
    in its place; ``_job_failed`` (above) only stops the ended job's heartbeat."""
    def kill_if_still_running():
        for request in list(worker_state.active_requests):
            if request.id == task_id:
                logger.warning("job task %s did not stop within %s s of its cancel: killing its pool process %s",
                               task_id, grace, request.worker_pid)
                try:
                    request.terminate(state.consumer.pool, signal="SIGKILL")
                except Exception:  # a pool that cannot kill one process (solo, threads): the time limits still hold
                    logger.exception("killing the pool process of job task %s failed", task_id)
    # Reserved too: a job whose pool process started it a moment ago may not be active here yet.
    if not any(request.id == task_id for request in (*worker_state.active_requests, *worker_state.reserved_requests)):
        return ok("not running here")
    state.consumer.timer.call_after(max(float(grace), 0.0), kill_if_still_running)
    return ok("stopping")
