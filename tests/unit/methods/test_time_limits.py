"""methods/time_limits.py: TOOL_MAX_SECONDS with one watch per loop, stopping as asyncio.timeout
does (only its own cancel becomes TimeoutError)."""
import asyncio

import pytest

from mcp_transport.methods import time_limits
from mcp_transport.methods.time_limits import TimeLimit


async def test_a_run_past_its_limit_is_stopped_with_timeout_error():
    limit = TimeLimit(0.05)
    with pytest.raises(TimeoutError):
        async with limit:
            await asyncio.sleep(30)
    assert limit.expired()
    assert asyncio.current_task().cancelling() == 0  # the cancel it caused is taken back


async def test_a_run_within_its_limit_is_left_alone_and_leaves_no_watch():
    limit = TimeLimit(0.05)
    async with limit:
        await asyncio.sleep(0)
    assert not limit.expired()
    await asyncio.sleep(0.1)  # the watch looks once more, finds nothing running, and ends
    assert asyncio.get_running_loop() not in time_limits._running


async def test_a_cancel_from_elsewhere_goes_through_as_it_came():
    async def run():
        async with TimeLimit(30):
            await asyncio.sleep(30)

    task = asyncio.create_task(run())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_many_runs_share_one_watch_and_each_is_stopped_at_its_own_deadline():
    async def run(seconds):
        limit = TimeLimit(seconds)
        try:
            async with limit:
                await asyncio.sleep(seconds * 4)
        except TimeoutError:
            return limit.expired()
        return False

    short, long = asyncio.create_task(run(0.05)), asyncio.create_task(run(0.3))
    await asyncio.sleep(0)
    assert len(time_limits._running[asyncio.get_running_loop()]) == 2
    assert await short is True and not long.done()
    assert await long is True


async def test_no_limit_is_no_watch():
    async with TimeLimit(None) as limit:
        await asyncio.sleep(0)
    assert not limit.expired() and asyncio.get_running_loop() not in time_limits._running


def test_a_loop_closed_before_its_watch_looked_again_is_not_kept():
    """The watch's table holds its loops weakly: a loop closed while its entry is there (its
    watch had not looked again) is not kept alive by it."""
    import gc

    async def run():
        async with TimeLimit(600):
            await asyncio.sleep(0)

    loop = asyncio.new_event_loop()
    loop.run_until_complete(run())
    assert loop in time_limits._running  # its watch has not looked again yet
    loop.close()
    holders = gc.get_referrers(loop)
    assert all(holder is not time_limits._running and holder is not getattr(time_limits._running, "data", None)
               for holder in holders)
