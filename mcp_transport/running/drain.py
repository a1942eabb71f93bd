"""A web process that was told to stop: the calls it runs finish, and one that cannot in time
gets an answer all the same.

Theory of operation. A rolling deploy stops one web process at a time with SIGTERM. Its calls
must not go with it: a 2025-11-25 call's answer is stored in its stream (the POST's own
response carries it, or a client that resumes the stream on another process reads it there),
a 2026-07-28 call's goes out on its open response. So every call the pipeline runs is tracked
here from its start to its answer (``tracking``, ``track``), and the drain, once begun
(``begin``; transports/draining.py does it on the signal), waits for them (``settle``): until
none is left, or DRAIN_SECONDS after the signal. A call still running then is stopped: its
handler's task is cancelled with the call marked ``stopped``, and ``pipeline.respond`` answers
it with ``ServerStopping.unfinished`` (-32000) the way its answer would have gone, stored
first: never silence, and never the orphan's -32603 that another process gives a call whose
process died (control.py: three missed heartbeats).

Background jobs are not calls of this process: their workers run them, and their streams are
followed from any process.
"""
import asyncio
import logging

from ..conf import get_config
from ..protocol.errors import ServerStopping

logger = logging.getLogger(__name__)

#: The calls running in this process, from their start to their answer: the task running each
#: (an inline call's request task, a streamed call's own task) -> its Call. The deadline stops
#: those whose handler runs now (``call.handling``, set by pipeline.respond around it): before
#: it (admission) and after it (its answer on its way) a call is left to finish.
_calls = {}
#: What ends by itself when the drain begins (``when_draining``): 2026-07-28 listens and task
#: streams, whose clients listen again or resume elsewhere.
_on_begin = set()
#: Whether the drain began; set when no call is left; its deadline (loop time) and grace.
_began = False
_idle = None
_deadline = None
_seconds = None


def active() -> bool:
    """Whether this process is draining: it takes no new request."""
    return _began


def begin(seconds=None) -> float:
    """Start draining (once): from now on new requests are refused and held listens end.
    Returns the deadline (event loop time) by which the calls must have answered."""
    global _began, _deadline, _idle, _seconds
    if not _began:
        _began = True
        _seconds = seconds = get_config()["DRAIN_SECONDS"] if seconds is None else seconds
        _deadline = asyncio.get_running_loop().time() + seconds
        _idle = asyncio.Event()
        if not _calls:
            _idle.set()
        for callback in list(_on_begin):
            callback()
    return _deadline


def when_draining(callback):
    """Call ``callback()`` when the drain begins (at once if it has); returns what unregisters it."""
    if _began:
        callback()
        return lambda: None
    _on_begin.add(callback)
    return lambda: _on_begin.discard(callback)


def track(task: asyncio.Task, call) -> None:
    """``task`` runs ``call`` until the task ends (a streamed call's own task)."""
    _calls[task] = call
    task.add_done_callback(untrack)


def untrack(task) -> None:
    """``task`` no longer runs a call (``tracking``'s end; a tracked task's done callback)."""
    _calls.pop(task, None)
    if _idle is not None and not _calls:
        _idle.set()


def tracking(call) -> asyncio.Task:
    """The current task runs ``call`` until ``untrack(task)`` (an inline call, in a try/finally:
    no context manager object, since every call pays for it)."""
    task = asyncio.current_task()
    _calls[task] = call
    return task


def calls_running() -> int:
    return len(_calls)


async def settle(deadline: float, answer_seconds: float) -> int:
    """Wait for the calls running here to answer, until ``deadline`` (loop time); then stop the
    handlers still running (their calls answer with the error) and give those answers
    ``answer_seconds`` to be written. Returns how many calls were stopped."""
    if await _idle_by(deadline - asyncio.get_running_loop().time()):
        return 0
    stopped = stop_handlers()
    if stopped:
        logger.warning("%d call(s) still running at the end of the drain's grace: answered with an error",
                       stopped, extra={"mcp_calls_stopped": stopped})
    if not await _idle_by(answer_seconds):
        logger.warning("%d call(s) did not answer before the process stops", len(_calls))
    return stopped


async def _idle_by(seconds: float) -> bool:
    try:
        await asyncio.wait_for(_idle.wait(), max(seconds, 0))
    except TimeoutError:
        return False
    return True


def stop_handlers() -> int:
    """Stop every call whose handler still runs: it answers with ``ServerStopping.unfinished``.
    A sync tool's thread cannot be stopped: its Context says cancelled, so one that checks
    stops (a thread that never returns holds the process's exit: Python waits for it)."""
    handling = [(task, call) for task, call in _calls.items() if call.handling]
    for task, call in handling:
        call.stopped = True
        _say_cancelled(call.channel)
        task.cancel()
    return len(handling)


def _say_cancelled(channel) -> None:
    try:
        channel.cancelled = True  # ctx.cancelled for the tool; a stream also ends its client waits
    except AttributeError:  # a channel without the flag (None before the handler took it)
        pass


def stopped_error() -> ServerStopping:
    """The answer of a call the drain stopped."""
    return ServerStopping.unfinished(get_config()["DRAIN_SECONDS"] if _seconds is None else _seconds)


def reset() -> None:
    """Forget a drain (tests run several in one process)."""
    global _began, _deadline, _idle, _seconds
    _began, _deadline, _idle, _seconds = False, None, None, None
    _on_begin.clear()
