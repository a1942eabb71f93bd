"""TOOL_MAX_SECONDS: one watch per event loop over every tool running on it, instead of a timer
each.

``asyncio.timeout`` gives every run a timer of its own: the loop's and the task's lookups, a
handle pushed on the loop's heap and cancelled again. That was 8 % of an echo call's time in the
application (bench/RESULTS.md, issue 39). Here a run only joins its loop's set of running tools;
one timer per loop, while any runs, stops those past their deadline. A run is stopped at most a
twentieth of the limit (and at most a second) late.

The stop is asyncio.timeout's: the run's task is cancelled, and the cancel it caused comes out
of the ``async with`` as ``TimeoutError`` (a cancel from anyone else goes through as it came).
"""
import asyncio
import weakref

#: loop -> the TimeLimits of the tools running on it (the entry goes when none runs, or with a
#: loop closed before its watch looked again).
_running = weakref.WeakKeyDictionary()


class TimeLimit:
    """``async with TimeLimit(seconds)``: the block is stopped ``seconds`` after it began (None:
    never). ``expired()`` says whether it was."""

    __slots__ = ("seconds", "deadline", "task", "cancelling", "stopped")

    def __init__(self, seconds):
        self.seconds, self.stopped = seconds, False

    async def __aenter__(self) -> "TimeLimit":
        if self.seconds is None:
            return self
        loop = asyncio.get_running_loop()
        self.task = asyncio.current_task(loop)
        self.cancelling = self.task.cancelling()
        self.deadline = loop.time() + self.seconds
        running = _running.get(loop)
        if running is None:
            running = _running[loop] = set()
            loop.call_later(_interval(self.seconds), _stop_late_runs, loop, running)
        running.add(self)
        return self

    async def __aexit__(self, exc_type, exc, tb) -> bool:
        if self.seconds is None:
            return False
        _running.get(self.task.get_loop(), set()).discard(self)
        # As asyncio.timeout: only the cancel this limit caused becomes TimeoutError.
        if self.stopped and self.task.uncancel() <= self.cancelling and exc_type is asyncio.CancelledError:
            raise TimeoutError from exc
        return False

    def expired(self) -> bool:
        return self.stopped


def _interval(seconds: float) -> float:
    return min(1.0, max(0.01, seconds / 20))


def _stop_late_runs(loop, running: set) -> None:
    """Stop the runs past their deadline; look again while any runs."""
    now, soonest = loop.time(), None
    for limit in list(running):
        if limit.deadline <= now:
            running.discard(limit)
            limit.stopped = True
            limit.task.cancel()
        else:
            soonest = limit.seconds if soonest is None else min(soonest, limit.seconds)
    if soonest is None:
        if _running.get(loop) is running:
            del _running[loop]
        return
    loop.call_later(_interval(soonest), _stop_late_runs, loop, running)
