"""The lanes' scheduling (mcp_transport/methods/threads.py): bounded, fair per session, and a slot comes
back when the thread ends or the call starts waiting for its client."""
import asyncio
import threading

import pytest
from django.test import override_settings

from mcp_transport.methods import threads


async def settle():
    for _ in range(3):
        await asyncio.sleep(0)


async def test_one_session_cannot_take_every_thread():
    lane = threads.Lane("t", threads=2, per_session=1)
    await lane.acquire("a")
    second_of_a = asyncio.ensure_future(lane.acquire("a"))
    await settle()
    assert not second_of_a.done()  # over a's share, though a thread is free
    await asyncio.wait_for(lane.acquire("b"), 1)  # b is not behind a's queued call
    assert lane.running == 2
    lane.release("a")
    await asyncio.wait_for(second_of_a, 1)
    assert lane.by_owner == {"a": 1, "b": 1}


async def test_a_freed_thread_goes_to_the_oldest_call_under_its_share():
    lane = threads.Lane("t", threads=1, per_session=1)
    await lane.acquire("a")
    queued = [asyncio.ensure_future(lane.acquire(owner)) for owner in ("a", "b", "c")]
    await settle()
    lane.release("a")
    await settle()
    assert [turn.done() for turn in queued] == [True, False, False]
    lane.release("a")
    await settle()
    assert [turn.done() for turn in queued] == [True, True, False]


async def test_a_cancelled_waiter_leaves_the_line_and_takes_nothing():
    lane = threads.Lane("t", threads=1, per_session=1)
    await lane.acquire("a")
    cancelled, later = asyncio.ensure_future(lane.acquire("b")), asyncio.ensure_future(lane.acquire("c"))
    await settle()
    cancelled.cancel()
    await settle()
    lane.release("a")
    await asyncio.wait_for(later, 1)
    assert lane.by_owner == {"c": 1} and lane.running == 1 and lane.waiting == 0


async def test_the_slot_comes_back_when_the_thread_ends_not_when_the_caller_is_cancelled():
    release = threading.Event()
    call = asyncio.ensure_future(threads.run(threads.HANDLERS, "a", release.wait))
    await settle()
    lane = threads.lanes().by_name[threads.HANDLERS]
    assert lane.by_owner["a"] == 1
    call.cancel()
    await settle()
    assert lane.by_owner["a"] == 1  # the thread still runs: still counted
    release.set()
    for _ in range(100):
        if not lane.by_owner:
            break
        await asyncio.sleep(0.01)
    assert not lane.by_owner and lane.running == 0


async def test_a_caller_running_something_never_takes_the_last_free_thread():
    """Issue 38 #3: two callers at their shares (4 of 8 each) held every thread, and a third
    caller's call waited for one of theirs to end."""
    lane = threads.Lane("t", threads=4, per_session=4, per_caller=4)
    for _ in range(2):
        await lane.acquire("s1", "a")
    await lane.acquire("s2", "b")
    third_of_b = asyncio.ensure_future(lane.acquire("s2", "b"))
    await settle()
    assert not third_of_b.done()  # it would take the last free thread, under b's share though it is
    await asyncio.wait_for(lane.acquire("s3", "c"), 1)  # a caller running nothing takes it
    assert lane.by_caller == {"a": 2, "b": 1, "c": 1}
    third_of_b.cancel()


async def test_a_freed_thread_goes_to_the_waiting_caller_that_runs_the_fewest_in_turn():
    """Not first come, first served: a caller that flooded the lane would be served before
    everyone who came after it."""
    lane = threads.Lane("t", threads=4, per_session=9, per_caller=9)
    for session, caller in (("s1", "a"), ("s1", "a"), ("s2", "b"), ("s3", "c")):
        await lane.acquire(session, caller)
    flood = [asyncio.ensure_future(lane.acquire("s1", "a")) for _ in range(3)]
    await settle()
    late_b, late_d = asyncio.ensure_future(lane.acquire("s2", "b")), asyncio.ensure_future(lane.acquire("s4", "d"))
    await settle()

    def granted():
        return [turn.done() for turn in (*flood, late_b, late_d)]

    lane.release("s1", "a")  # d runs nothing: first, though a's calls waited longer
    await settle()
    assert granted() == [False, False, False, False, True]
    lane.release("s3", "c")  # the last free thread: nobody waiting runs nothing
    await settle()
    assert granted() == [False, False, False, False, True]
    lane.release("s4", "d")  # a and b run one each: a's turn first, then the room is kept
    await settle()
    assert granted() == [True, False, False, False, True]
    lane.release("s1", "a")  # a and b run one each again: b's turn now, a's was last
    await settle()
    assert granted() == [True, False, False, True, True]
    assert lane.waiting == 2
    for turn in flood[1:]:
        turn.cancel()


@override_settings(MCP_TRANSPORT={"SYNC_TOOL_THREADS": 1, "SYNC_WAITING_THREADS": 1})
async def test_a_call_waiting_for_its_client_holds_no_thread_and_waits_are_bounded():
    every = threads.Lanes()
    lane = every.by_name[threads.TOOLS]
    await lane.acquire("a")
    hold = threads.Hold(every, lane, "a")
    hold.holding = True
    answer = asyncio.get_running_loop().create_future()
    waiting = asyncio.ensure_future(hold.client_wait(lambda: answer))
    await settle()
    assert lane.running == 0 and every.waits.total == 1  # the thread slot is free for others
    other = threads.Hold(every, lane, "b")
    with pytest.raises(threads.TooManyWaiting):
        await other.client_wait(lambda: answer)  # no room for a second wait
    answer.set_result("yes")
    assert await asyncio.wait_for(waiting, 1) == "yes"
    assert lane.running == 1 and hold.holding and every.waits.total == 0
    hold.done()
    assert lane.running == 0


@override_settings(MCP_TRANSPORT={"SYNC_WAITING_THREADS": 8, "SYNC_WAITING_PER_SESSION": 1,
                                  "SYNC_WAITING_PER_CALLER": 2})
async def test_one_callers_sessions_share_its_waiting_places():
    """Issue 20 #1: one client's many sessions filled SYNC_WAITING_THREADS for everyone."""
    every = threads.Lanes()
    lane = every.by_name[threads.TOOLS]
    answer = asyncio.get_running_loop().create_future()

    async def ask(session, caller):
        await lane.acquire(session)
        hold = threads.Hold(every, lane, session, caller)
        hold.holding = True
        return hold, asyncio.ensure_future(hold.client_wait(lambda: answer))

    held = [await ask(f"hog-{i}", "address:10.0.0.1") for i in range(2)]
    await settle()
    assert every.waits.by_caller["address:10.0.0.1"] == 2
    with pytest.raises(threads.TooManyWaiting, match="This client"):
        await threads.Hold(every, lane, "hog-2", "address:10.0.0.1").client_wait(lambda: answer)
    victim, waiting = await ask("victim", "address:10.0.0.2")  # another client still has room
    await settle()
    assert every.waits.total == 3
    answer.set_result("yes")
    for hold, wait in [*held, (victim, waiting)]:
        assert await asyncio.wait_for(wait, 1) == "yes"
        hold.done()
    assert every.waits.total == 0 and not every.waits.by_caller


def test_event_loops_share_the_process_threads_and_their_database_connections():
    """async_to_sync makes an event loop per call (LocalClient's sync methods do): each loop's lanes
    used to make their own threads, and each thread kept its database connection open (91
    PostgreSQL connections for tests/toolsets in one process, past max_connections in CI)."""
    async def executors():
        return {name: lane.executor for name, lane in threads.lanes().by_name.items()}

    first, second = asyncio.run(executors()), asyncio.run(executors())
    assert all(first[name] is second[name] for name in first)
