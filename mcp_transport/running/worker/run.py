"""Running a job: the Celery task ``mcp_transport.run_job`` (its name is given, so it does not
depend on this module's path) and the ``JobRun`` it executes."""
import asyncio
import concurrent.futures
import inspect
import logging
import math
import os
import threading
import time

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone

from ...state import control, sessions
from .. import calls, jobs
from ..jobs import following, outcome, rows, settling, shares, submitting
from ...conf import get_config
from ... import tracing
from ...logs import short_id
from ...methods.content import error_result
from ...methods.context import ClientCapabilityError, ClientRequestError, Context, ToolCancelled
from ...methods.registry import ArgumentError, ToolError, registry
from ...storage import get_event_store
from .channel import JobChannel, JobParked, caller_share, job_store, keeps_room, run_until_parked, worker_slots
from .context import WorkerContext, _Handle
from .loop import bridge

logger = logging.getLogger(__name__)

Status = jobs.Status


@shared_task(bind=True, name="mcp_transport.run_job", acks_late=True, ignore_result=True)
def run_job(self, job_id: str, session_id: str = "", stream_key: str = ""):
    """Run one background tool call (jobs.submit sends it)."""
    job = bridge().run(rows.riding_out_database(jobs.load, job_id))
    if job is None or job.status != Status.QUEUED or job.celery_task_id != self.request.id:
        return  # cancelled or ended before it started, or a stale redelivery
    spec = registry.tools.get(job.tool)
    if spec is None:
        text = f"Tool {job.tool} is not registered in this worker."
        bridge().run(outcome.finish(job, Status.FAILED, error_result(text), error=text, **rows.internal_failure(job)))
        return
    asked, answers = bridge().run(following.asked_and_answered(job.id))
    run = JobRun(job, spec, asked, answers, worker=self.request.hostname or "")
    # The limits the web process sent with the task (submitting.celery_options), not this process's settings.
    run.soft_time_limit = (self.request.timelimit or (None, None))[1] or run.soft_time_limit
    if not bridge().run(run.take_place()):
        return  # over its caller's share: back in the queue, and this slot runs another job
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
        #: The job's run is over: its watchers stop (a cancel alone may not reach them, below).
        self._ended = False
        #: The tool did not end on its own terms (a crash or a time limit), not "it reported an error".
        self.failed_internally = False
        #: Seconds of the soft time limit Celery runs this job with.
        self.soft_time_limit = submitting.time_limits(spec)[0]
        #: The job whose turn this worker's next free slot is (take_place), woken at the start.
        self.next_turn = ""

    async def take_place(self) -> bool:
        """A place among its caller's running jobs, across every worker (caller_share, jobs/shares.py),
        in its turn among callers; False when it must wait: the job goes back to the queue
        (submitting.defer), still queued, and holds no slot while it waits (and the job it lets go
        first, if any, is woken)."""
        limit, queue = caller_share(self.spec), submitting.queue_of(self.spec)
        seconds = submitting.defer_seconds(self.job)
        try:
            turn = await shares.take_place(self.job, limit, seconds, queue=queue, worker=self.channel.worker,
                                         slots=worker_slots(), room=keeps_room(self.spec))
        except Exception:  # Redis is away for longer than it is ridden out: the job runs unshared
            logger.warning("taking a place for job %s failed", short_id(self.job.id), exc_info=True)
            return True
        if turn.taken:
            self.next_turn = turn.first  # woken once this job is seen started (start)
            return True
        await submitting.defer(self.job, self.spec, limit, seconds, turn.why)
        await self.wake(turn.first)
        return False

    async def wake(self, job_id) -> None:
        """The job whose turn it is goes now, not at its countdown (submitting.wake)."""
        if not job_id:
            return
        try:
            await submitting.wake(job_id, submitting.queue_of(self.spec))
        except Exception:  # it comes back at its countdown anyway
            logger.warning("waking job %s failed", short_id(job_id), exc_info=True)

    async def give_place_back(self) -> None:
        try:
            await submitting.release(self.job, worker=self.channel.worker, limit=caller_share(self.spec))
        except Exception:  # its place lapses anyway (shares.lease_ms)
            logger.warning("giving back the place of job %s failed", short_id(self.job.id), exc_info=True)

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
        running_key = (self.job.session_id, settling.cancel_key(self.job))
        control.running[running_key] = (self.channel, self.handle)
        started = False
        try:
            started = await rows.riding_out_database(
                rows.transition, self.job.id, Status.WORKING, (Status.QUEUED,),
                where={"celery_task_id": self.job.celery_task_id}, started_at=timezone.now(),
                attempts=self.job.attempts + 1, worker=worker, message="")
        finally:
            if not started:
                control.running.pop(running_key, None)
        if not started:
            await self.give_place_back()
            return False
        self.job.status, self.job.attempts = Status.WORKING, self.job.attempts + 1
        await control.beat(self.job.session_id, self.job.stream_key)
        await self.wake(self.next_turn)  # after this job's start: it had the turn first
        self.context = await self._make_context()
        if self.job.attempts > 1 or self.channel.asked_before:
            self.context._last_progress = await self._progress_sent()
        loop = asyncio.get_running_loop()
        self._watchers = [loop.create_task(self._progress_heartbeat()), loop.create_task(self._watch_row())]
        await outcome.announce(self.job)
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
        # A watcher cancelled inside a database read does not stop: asgiref's SyncToAsync waits
        # for its thread and returns, swallowing the cancel. Left looping, it renewed the ended
        # job's place among its caller's running jobs every beat, for ever, and every later
        # job of that caller waited behind it. So the flag, and the wait for their end before
        # the place is given back.
        self._ended = True
        pending = set(self._watchers)
        while pending:  # cancelled again if one swallowed it and sleeps on
            for watcher in pending:
                watcher.cancel()
            _, pending = await asyncio.wait(pending, timeout=1.0)
        progress = self.channel.unwritten_progress()
        if result is _PARKED or result is _UNFINISHED:
            control.running.pop((self.job.session_id, settling.cancel_key(self.job)), None)
        if result is _PARKED:
            await job_store().flush()  # the questions are in the database before the slot is free
            await self.give_place_back()  # before park(): an answer in already queues it again
            await self.channel.park()
            return
        if result is _UNFINISHED:
            # The process is being stopped (Celery's hard time limit sends SIGTERM first, then
            # SIGKILL): its heart stops here, and Celery's main process says why (settling.watch).
            return
        try:
            # The heart beats until the job's end is written: while the database is away (and
            # the write retries) nobody may take this worker for lost.
            await rows.riding_out_database(self._finish, result, progress)
        finally:
            control.running.pop((self.job.session_id, settling.cancel_key(self.job)), None)
            await self.give_place_back()
        for store in {job_store(), get_event_store()}:  # an ended job's events are in the database
            await store.flush()

    async def _finish(self, result, progress):
        if result is None:
            if await outcome.finish(self.job, Status.CANCELLED, error=settling.CANCELLED_BY_CLIENT, **progress):
                # The worker ended it before any cancel did (its session's ``closed`` message came
                # first): the stop is recorded here, with why and by whom that message says.
                await calls.job_stopped(self.job, self._stop())
        else:
            if self.failed_internally:
                progress = {**progress, **rows.internal_failure(self.job)}
            await outcome.finish(self.job, outcome.outcome_status(result), result, error=outcome.error_text(result),
                                 **progress)

    def _stop(self) -> "jobs.Stop":
        closed_by = self.channel.closed_by
        if isinstance(closed_by, (list, tuple)) and len(closed_by) == 2 and closed_by[0]:
            return settling.closed_session_stop(*closed_by)
        return jobs.Stop("stopped in its worker")

    async def _progress_heartbeat(self):
        """Progress every PROGRESS_HEARTBEAT_SECONDS while the tool reports none, so clients with
        short request timeouts keep waiting. "The progress value MUST increase with each
        notification": each beat adds the smallest step a float can take, which any later
        progress of the tool's own still exceeds."""
        every = get_config()["PROGRESS_HEARTBEAT_SECONDS"]
        if not every or self.context.progress_token is None:
            return
        while not self._ended:
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
        """A cancel whose control message this process missed still reaches the tool; and the
        job's place among its caller's running jobs lasts another beat (shares.refresh_place)."""
        while True:
            await asyncio.sleep(control.heartbeat_seconds())
            if self._ended:
                return
            try:
                await shares.refresh_place(self.job, worker=self.channel.worker)
            except Exception:
                logger.warning("keeping the place of job %s failed", short_id(self.job.id), exc_info=True)
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
