"""Each caller's share of the workers (jobs/shares.py, submitting.py), the parts below a worker:
the Redis line against the run's real Redis (places, order, lapsing places of killed workers),
whose job is whose, the default share and its settings. The flow (a real worker of two slots,
two callers, both eras) is tests/integration/test_job_shares.py."""
import asyncio
import secrets
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest
from django.conf import settings
from django.test import override_settings

from mcp_transport import checks as mcp_checks
from mcp_transport.models import McpJob
from mcp_transport.running import worker
from mcp_transport.running.jobs import outcome, rows, settling, shares, submitting
from mcp_transport.state import quotas
from mcp_transport.state.sessions import SessionRecord

T0 = datetime(2026, 12, 2, 10, 0, tzinfo=timezone.utc)


def job(n, caller, created=None, **fields):
    return SimpleNamespace(id=f"job{n}-{secrets.token_hex(4)}", created_at=created or T0 + timedelta(seconds=n),
                           context={"caller": caller}, principal="", session_id="s", **fields)


def new_caller():
    return f"caller:{secrets.token_hex(8)}"


def new_queue():
    """A queue of the test's own: its line holds no other test's jobs."""
    return f"q-{secrets.token_hex(4)}"


def taking(queue):
    """shares.take_place on ``queue``, as a worker whose slots are not counted: True if taken."""
    async def take(job, limit, wait_seconds):
        return (await shares.take_place(job, limit, wait_seconds, queue=queue)).taken
    return take


def run(coroutine):
    return asyncio.run(coroutine)


def test_a_caller_gets_its_share_and_its_jobs_wait_their_turn_in_the_order_sent():
    queue = new_queue()
    take = taking(queue)
    caller = new_caller()
    first, second, third = job(1, caller), job(2, caller), job(3, caller)

    async def scenario():
        taken = [await take(first, 1, 1), await take(third, 1, 1), await take(second, 1, 1)]
        head = await shares.give_back(caller, first.id, queue=queue)
        # The third job comes back first, but the second is ahead of it in the line.
        after = [await take(third, 1, 1), await take(second, 1, 1), await take(second, 1, 1)]  # a redelivery
        return taken, head, after
    taken, head, after = run(scenario())
    assert taken == [True, False, False]
    assert head == second.id
    assert after == [False, True, True]


def test_another_caller_is_not_held_up_and_a_share_of_two_runs_two():
    queue = new_queue()
    take = taking(queue)
    hog, other = new_caller(), new_caller()

    async def scenario():
        return [await take(job(n, hog), 2, 1) for n in range(3)], await take(job(9, other), 2, 1)
    assert run(scenario()) == ([True, True, False], True)


def test_a_killed_workers_place_lapses_and_a_refreshed_one_does_not(monkeypatch):
    queue = new_queue()
    take = taking(queue)
    caller = new_caller()
    monkeypatch.setattr(shares, "lease_ms", lambda: 300)
    alive, killed, waiting = job(1, caller), job(2, caller), job(3, caller)

    async def scenario():
        assert await take(alive, 2, 1) and await take(killed, 2, 1)
        assert not await take(waiting, 2, 1)
        for _ in range(4):  # the live job's worker beats; the killed one's does not
            await asyncio.sleep(0.15)
            await shares.refresh_place(alive)
        return await take(waiting, 2, 1), await take(job(4, caller), 2, 1)
    assert run(scenario()) == (True, False)


def test_a_waiting_entry_nobody_renews_stops_holding_up_the_line(monkeypatch):
    queue = new_queue()
    take = taking(queue)
    caller = new_caller()
    monkeypatch.setattr(shares, "WAIT_GRACE_SECONDS", 0)
    running, lost, later = job(1, caller), job(2, caller), job(3, caller)

    async def scenario():
        assert await take(running, 1, 1)
        assert not await take(lost, 1, 0.2)  # its message is lost: it never comes back
        await shares.give_back(caller, running.id, queue=queue)
        blocked = await take(later, 1, 1)  # the lost one is ahead of it
        await asyncio.sleep(0.3)
        return blocked, await take(later, 1, 1)
    assert run(scenario()) == (False, True)


def test_give_back_of_an_ended_job_in_line_names_the_next_one_only_when_asked():
    queue = new_queue()
    take = taking(queue)
    caller = new_caller()
    running, gone, next_one = job(1, caller), job(2, caller), job(3, caller)

    async def scenario():
        await take(running, 1, 1)
        await take(gone, 1, 1)
        await take(next_one, 1, 1)
        return (await shares.give_back(caller, gone.id, queue=queue), await shares.give_back(caller, gone.id, next_anyway=True, queue=queue),
                await shares.give_back(caller, running.id, queue=queue))
    assert run(scenario()) == ("", next_one.id, next_one.id)


def test_a_job_is_its_principals_else_its_addresss_in_both_eras(monkeypatch):
    async def load(session_id):
        return SessionRecord(id=session_id, protocol_version="2025-11-25", address="198.51.100.7")
    monkeypatch.setattr(submitting.sessions, "load", load)

    def caller(principal, sessionless):
        return run(submitting.default_caller(principal, "s" * 32, sessionless))
    assert caller("user:7", False) == caller("user:7", True) == quotas.caller_key("user:7", "")
    assert caller("", False) == quotas.caller_key("", "198.51.100.7")
    # A 2026-07-28 call names its caller (submit's ``caller``: its client address's key); one that
    # does not counts alone.
    assert caller("", True) == "session:" + "s" * 32
    old = SimpleNamespace(context={}, principal="", session_id="abc")
    assert rows.caller_of(old) == "session:abc"


@pytest.mark.parametrize("slots, share", [(1, 1), (2, 1), (3, 2), (8, 7)])
def test_the_default_share_leaves_one_slot_of_the_worker_to_others(monkeypatch, slots, share):
    monkeypatch.setattr(worker.channel, "_worker_concurrency", slots)
    assert worker.caller_share(SimpleNamespace(name="slow_job")) == share


def test_the_share_and_a_tools_own_are_settings():
    custom = {**settings.MCP_TRANSPORT, "MAX_RUNNING_JOBS_PER_CALLER": 3,
              "MAX_RUNNING_JOBS_PER_CALLER_BY_TOOL": {"book_list_all": 1}}
    with override_settings(MCP_TRANSPORT=custom):
        assert worker.caller_share(SimpleNamespace(name="slow_job")) == 3
        assert worker.caller_share(SimpleNamespace(name="book_list_all")) == 1
        assert mcp_checks.values_check(None) == []


@pytest.mark.parametrize("share, by_tool", [(0, {}), (1.5, {}), (True, {}), (None, {"t": 0}), (None, ["t"])])
def test_a_share_that_would_never_start_a_job_is_e004(share, by_tool):
    custom = {**settings.MCP_TRANSPORT, "MAX_RUNNING_JOBS_PER_CALLER": share,
              "MAX_RUNNING_JOBS_PER_CALLER_BY_TOOL": by_tool}
    with override_settings(MCP_TRANSPORT=custom):
        assert [m.id for m in mcp_checks.values_check(None)] == ["mcp_transport.E004"]


def test_a_deferred_job_is_looked_at_again_sooner_the_less_it_has_waited(monkeypatch):
    now = datetime.now(timezone.utc)
    ages = [0, 8, 60, 3600]
    assert [submitting.defer_seconds(SimpleNamespace(created_at=now - timedelta(seconds=age))) for age in ages] == \
        pytest.approx([1, 2, 15, submitting.DEFER_MAX_SECONDS], abs=0.1)


def test_a_waiting_job_says_why_and_one_nobody_looked_at_for_long_is_sent_again():
    now = datetime.now(timezone.utc)
    waiting = McpJob(id="w" * 32, status="queued", message=outcome.CALLER_BUSY.format(limit=2), created_at=now,
                          updated_at=now, ttl_ms=60000)
    assert outcome.task_view(waiting)["statusMessage"].startswith("Queued: its caller runs 2 background jobs")
    assert not settling.deferral_lost(waiting)
    waiting.updated_at = now - timedelta(seconds=submitting.DEFER_MAX_SECONDS + shares.WAIT_GRACE_SECONDS + 1)
    assert settling.deferral_lost(waiting)
    plain = McpJob(id="q" * 32, status="queued", message="", created_at=now, updated_at=waiting.updated_at)
    assert not settling.deferral_lost(plain)
    assert outcome.task_view(plain)["statusMessage"] == "Queued: waiting for a worker."


# -- issue 38 #4: a freed slot goes round the callers -----------------------------------------

def test_a_freed_place_names_the_job_of_the_caller_running_the_fewest_and_served_least_recently():
    """Before, a hog's ended job woke the same hog's next job, ahead of a third user's."""
    queue, first_hog, second_hog, victim = new_queue(), new_caller(), new_caller(), new_caller()
    a1, a2, b1, b2, v1 = job(1, first_hog), job(2, first_hog), job(3, second_hog), job(4, second_hog), job(5, victim)

    async def scenario():
        for one in (a1, a2, b1, b2):  # each hog runs its first job; its second waits (share 1)
            await shares.enter_line(one, queue)
            await shares.take_place(one, 1, 1, queue=queue)
        await shares.enter_line(v1, queue)  # submitted: nobody has looked at it yet
        head = await shares.give_back(first_hog, a1.id, queue=queue)
        # The first hog's second job is looked at first: the victim's turn comes before it.
        return head, await shares.take_place(a2, 1, 1, queue=queue), await shares.take_place(v1, 1, 1, queue=queue)
    head, hog_turn, victim_turn = run(scenario())
    assert head == v1.id
    assert hog_turn == shares.Turn(False, "turn", v1.id)
    assert victim_turn.taken


def test_a_caller_running_a_job_leaves_a_workers_last_free_slot_to_another_caller():
    queue, hog, other = new_queue(), new_caller(), new_caller()

    async def scenario():
        slots = {"queue": queue, "worker": f"w-{secrets.token_hex(4)}", "slots": 3, "room": True}
        hog_turns = [await shares.take_place(job(n, hog), 3, 1, **slots) for n in range(3)]
        return hog_turns, await shares.take_place(job(9, other), 3, 1, **slots)
    hog_turns, other_turn = run(scenario())
    assert [turn.taken for turn in hog_turns] == [True, True, False] and hog_turns[2].why == "room"
    assert other_turn.taken


def test_a_job_lets_others_go_first_only_so_many_times(monkeypatch):
    """A job whose turn it is may never come (its message lost with a broker)."""
    monkeypatch.setattr(shares, "TURN_YIELDS", 2)
    queue, hog, lost = new_queue(), new_caller(), new_caller()
    served, waiting, never = job(1, hog), job(2, hog), job(3, lost)

    async def scenario():
        await shares.take_place(served, 1, 1, queue=queue)
        await shares.give_back(hog, served.id, queue=queue)
        await shares.enter_line(never, queue)
        return [(await shares.take_place(waiting, 1, 1, queue=queue)).why or "taken" for _ in range(3)]
    assert run(scenario()) == ["turn", "turn", "taken"]
