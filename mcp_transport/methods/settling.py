"""Running a handler's coroutine until it ends or waits on nothing but its client's answers.

A handler that asks its client something is replayed rather than kept waiting: an inline
2026-07-28 handler ends its round with an ``InputRequiredResult`` (eras/modern_2026/rounds.py), a
background tool parks its job until the answer comes (running/worker/channel.py). A sync handler stops
at its first unanswered question; an async one may ask several at once (``asyncio.gather``), so
each question parks its own branch (an awaited future that never resolves) and sets ``changed``.

Once ``changed`` is set the run waits SETTLE_TURNS loop turns: a branch that is about to ask
(one turn each) asks in the same run, and any new question restarts the wait. When the turns
pass with no new question, the coroutine still running and ``settled()`` true after each turn,
the run ends with ``ending()``. No task is left on the loop: the coroutine's task is cancelled
and awaited, and with it any branch that was doing something else; that branch runs again next
time, as everything a handler does before its answers does.
"""
import asyncio
from collections.abc import Callable

#: Loop turns without a new question after which a coroutine is taken to wait on nothing else:
#: enough for every branch of an ``asyncio.gather`` to reach its first question (one turn each).
SETTLE_TURNS = 3


def _always() -> bool:
    return True


async def run_until_settled(coroutine, changed: asyncio.Event, ending: Callable[[], BaseException],
                            settled: Callable[[], bool] = _always):
    """Run ``coroutine`` as a task; its value, or the exception ``ending()`` makes once it settles.

    ``ending()`` is called before the task is cancelled, so what it captures (the questions asked)
    is what the coroutine had asked, not what its cancellation did."""
    task = asyncio.ensure_future(coroutine)
    try:
        while not task.done():
            await _until_done_or_changed(task, changed)
            if task.done():
                break
            changed.clear()
            if await _stays_settled(task, changed, settled):
                raise ending()
        return task.result()
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def _until_done_or_changed(task, changed):
    waiter = asyncio.ensure_future(changed.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()


async def _stays_settled(task, changed, settled) -> bool:
    """True when SETTLE_TURNS loop turns passed with no new question, the coroutine still runs and
    ``settled()`` held after every turn."""
    for _ in range(SETTLE_TURNS):
        await asyncio.sleep(0)
        if task.done() or changed.is_set() or not settled():
            return False
    return True
