"""``tasks/stream`` (SEP-2694, a draft; experimental, behind TASK_STREAMS): a task of the tasks
extension (tasks.py) as a resumable stream of events, from the event store, on any web process.

"This SEP extends MCP Tasks with a minimal, resumable event stream": it is a method of the
2026-07-28 tasks extension (SEP-2663, which it "builds on top of"), beside ``subscriptions/listen``
("complementary reliability tiers"). The 2025-11-25 tasks utility already has a resumable stream
per task (its messages on the session's streams, Last-Event-ID): it has no tasks/stream (-32601).

A task's events are its job stream's entries (protocol/task_streams.py: what each says), numbered
from its first one, which the server stores when it creates the task: an event's ``seq`` is its
entry's index, the same on every process, with no counter of its own (every entry up to the
task's end is an event). So the request reads the entries after ``after`` by their index
(running/job_streams.read_numbered: what follows the cursor, not the stream before it: a resume
at the end of a 10,000-event task reads one entry's id), replays them, then relays new ones as
the worker appends them (running/job_streams.events_after: a job's stream on the one follow loop,
streams.tail), and ends with the task ("the receiver MUST return TaskStreamResult").
"""
import asyncio
from contextlib import aclosing

from ... import auth
from ...running import drain, job_streams, jobs
from ...methods.specs import MethodTable, always
from ...protocol import task_streams
from . import tasks as modern_tasks


class Timeline:
    """The task's job stream read as its events, in order: each stored entry numbered as it
    comes (``take``), from the entry at ``start`` on (``previous``: the one before it, whose
    position the stream is followed from), until the task's end."""

    __slots__ = ("job", "next_seq", "position", "ended")

    def __init__(self, job, start: int = 0, previous=None):
        self.job, self.next_seq = job, start
        self.position = previous.id.position if previous is not None else "0-0"
        self.ended = previous is not None and previous.final

    async def take(self, stored):
        """The ``notifications/tasks/event`` of one stored entry, or None (no task event, or
        after the task's end: "MUST deliver events in sequence order", and none after the last).
        Its seq is its entry's index, as ``after`` finds it (an entry that is no event, of which
        a task's stream has none before its end, would leave its seq unused)."""
        self.position = stored.id.position
        if self.ended:
            return None
        seq, self.next_seq = self.next_seq, self.next_seq + 1
        end = await self._end() if stored.final else None
        found = task_streams.event_of(stored.message, stored.final, end)
        if found is None:
            return None
        self.ended = stored.final
        return task_streams.event(self.job.id, seq, *found)

    async def _end(self) -> dict:
        """The task's status at its end, as tasks/get shows it (the row ended before its stream)."""
        job = await jobs.load(self.job.id) or self.job
        view = modern_tasks.view(job)
        return {key: view[key] for key in ("status", "statusMessage") if key in view}


async def tasks_stream(params, call):
    """"Clients start or resume a task event stream by sending tasks/stream": the events after
    ``after`` (all those kept without it), then the new ones until the task ends. Closing the
    response stops the stream, not the task ("Cancellation stops event delivery but does not
    cancel the underlying task")."""
    after = task_streams.after(params)
    job = await modern_tasks.owned(params, call)  # tasks/get's check: "the same authorization checks"
    start = 0 if after is None else after + 1
    found = await job_streams.read_numbered(job, task_streams.opening(job.id), start)
    if found is None:
        raise task_streams.events_gone(job.id)
    if start > found.count:
        raise task_streams.past_the_end(after, found.count - 1)
    timeline = Timeline(job, start, found.previous)
    backlog = [event for event in [await timeline.take(stored) for stored in found.events] if event is not None]
    await job_streams.charge_replay(call, backlog)  # what was read, and is sent again
    for event in backlog:
        await call.channel.notify(event["method"], event["params"])
    if not timeline.ended:
        await _follow(timeline, call)
    return {}


async def _follow(timeline, call) -> None:
    """Relay the task's new events until it ends, or until the token the stream was opened with
    expires or is revoked, or the process stops (drain.py): then the stream ends as any does, and
    the client, resuming with ``after`` (on another process), gets the rest, or the 401 that
    sends it for a new token ("Receivers MAY close a stream before a task reaches a terminal
    state")."""
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(None) as token_end:
            def end_now():
                token_end.reschedule(loop.time())
            stop_watching, stop_waiting = auth.watch_token(call.principal, end_now), drain.when_draining(end_now)
            try:
                async with aclosing(job_streams.events_after(timeline.job, timeline.position)) as stored:
                    async for entry in stored:
                        event = await timeline.take(entry)
                        if event is not None:
                            await call.channel.notify(event["method"], event["params"])
            finally:
                stop_watching()
                stop_waiting()
    except TimeoutError:
        if not token_end.expired():
            raise


METHODS = MethodTable()
#: It sends until the task ends: a stream of its own, counted among its caller's calls
#: (MAX_CALLS_PER_CALLER: "Receivers SHOULD enforce limits on: Concurrent streams per client").
METHODS.method(task_streams.METHOD, capability="task_streams", counts_as_call=True, may_send=always,
               target="taskId")(tasks_stream)
