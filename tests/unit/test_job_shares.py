"""Each caller's share of the workers (jobs/shares.py, deferring.py), the parts below a worker:
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
from mcp_transport.running import jobs, worker
from mcp_transport.running.jobs import deferring, shares
from mcp_transport.state import quotas
from mcp_transport.state.sessions import SessionRecord

T0 = datetime(2026, 12, 2, 10, 0, tzinfo=timezone.utc)


def job(n, caller, created=None, **fields):
    return SimpleNamespace(id=f"job{n}-{secrets.token_hex(4)}", created_at=created or T0 + timedelta(seconds=n),
                           context={"caller": caller}, principal="", session_id="s", **fields)


def new_caller():
    return f"caller:{secrets.token_hex(8)}"


def run(coroutine):
    return asyncio.run(coroutine)


def test_a_caller_gets_its_share_and_its_jobs_wait_their_turn_in_the_order_sent():
    caller = new_caller()
    first, second, third = job(1, caller), job(2, caller), job(3, caller)

    async def scenario():
        taken = [await shares.take_place(first, 1, 1), await shares.take_place(third, 1, 1),
                 await shares.take_place(second, 1, 1)]
        head = await shares.give_back(caller, first.id)
        # The third job comes back first, but the second is ahead of it in the line.
        after = [await shares.take_place(third, 1, 1), await shares.take_place(second, 1, 1),
                 await shares.take_place(second, 1, 1)]  # a redelivery keeps its place
        return taken, head, after
    taken, head, after = run(scenario())
    assert taken == [True, False, False]
    assert head == second.id
    assert after == [False, True, True]


def test_another_caller_is_not_held_up_and_a_share_of_two_runs_two():
    hog, other = new_caller(), new_caller()

    async def scenario():
        return ([await shares.take_place(job(n, hog), 2, 1) for n in range(3)],
                await shares.take_place(job(9, other), 2, 1))
    assert run(scenario()) == ([True, True, False], True)


def test_a_killed_workers_place_lapses_and_a_refreshed_one_does_not(monkeypatch):
    caller = new_caller()
    monkeypatch.setattr(shares, "lease_ms", lambda: 300)
    alive, killed, waiting = job(1, caller), job(2, caller), job(3, caller)

    async def scenario():
        assert await shares.take_place(alive, 2, 1) and await shares.take_place(killed, 2, 1)
        assert not await shares.take_place(waiting, 2, 1)
        for _ in range(4):  # the live job's worker beats; the killed one's does not
            await asyncio.sleep(0.15)
            await shares.refresh_place(alive)
        return await shares.take_place(waiting, 2, 1), await shares.take_place(job(4, caller), 2, 1)
    assert run(scenario()) == (True, False)


def test_a_waiting_entry_nobody_renews_stops_holding_up_the_line(monkeypatch):
    caller = new_caller()
    monkeypatch.setattr(shares, "WAIT_GRACE_SECONDS", 0)
    running, lost, later = job(1, caller), job(2, caller), job(3, caller)

    async def scenario():
        assert await shares.take_place(running, 1, 1)
        assert not await shares.take_place(lost, 1, 0.2)  # its message is lost: it never comes back
        await shares.give_back(caller, running.id)
        blocked = await shares.take_place(later, 1, 1)  # the lost one is ahead of it
        await asyncio.sleep(0.3)
        return blocked, await shares.take_place(later, 1, 1)
    assert run(scenario()) == (False, True)


def test_give_back_of_an_ended_job_in_line_names_the_next_one_only_when_asked():
    caller = new_caller()
    running, gone, next_one = job(1, caller), job(2, caller), job(3, caller)

    async def scenario():
        await shares.take_place(running, 1, 1)
        await shares.take_place(gone, 1, 1)
        await shares.take_place(next_one, 1, 1)
        return (await shares.give_back(caller, gone.id), await shares.give_back(caller, gone.id, next_anyway=True),
                await shares.give_back(caller, running.id))
    assert run(scenario()) == ("", next_one.id, next_one.id)


def test_a_job_is_its_principals_else_its_addresss_in_both_eras(monkeypatch):
    async def load(session_id):
        return SessionRecord(id=session_id, protocol_version="2025-11-25", address="198.51.100.7")
    monkeypatch.setattr(shares.sessions, "load", load)
    modern_slot = quotas.Slot(quotas.keys().calls(quotas.caller_key("", "203.0.113.9")), "t")
    session_slot = quotas.Slot(quotas.keys().calls("s" * 32), "t")

    def caller(context, principal, slot):
        return run(shares.caller_context(context, principal=principal, session_id="s" * 32, slot=slot))["caller"]
    assert caller(None, "user:7", session_slot) == caller({"era": "2026-07-28"}, "user:7", modern_slot) \
        == quotas.caller_key("user:7", "")
    assert caller({"era": "2026-07-28"}, "", modern_slot) == quotas.caller_key("", "203.0.113.9")
    assert caller(None, "", session_slot) == quotas.caller_key("", "198.51.100.7")
    old = SimpleNamespace(context={}, principal="", session_id="abc")
    assert shares.caller_of(old) == "session:abc"


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
    assert [deferring.defer_seconds(SimpleNamespace(created_at=now - timedelta(seconds=age))) for age in ages] == \
        pytest.approx([1, 2, 15, deferring.DEFER_MAX_SECONDS], abs=0.1)


def test_a_waiting_job_says_why_and_one_nobody_looked_at_for_long_is_sent_again():
    now = datetime.now(timezone.utc)
    waiting = McpJob(id="w" * 32, status="queued", message=jobs.CALLER_BUSY.format(limit=2), created_at=now,
                          updated_at=now, ttl_ms=60000)
    assert jobs.task_view(waiting)["statusMessage"].startswith("Queued: its caller runs 2 background jobs")
    assert not jobs.deferral_lost(waiting)
    waiting.updated_at = now - timedelta(seconds=deferring.DEFER_MAX_SECONDS + shares.WAIT_GRACE_SECONDS + 1)
    assert jobs.deferral_lost(waiting)
    plain = McpJob(id="q" * 32, status="queued", message="", created_at=now, updated_at=waiting.updated_at)
    assert not jobs.deferral_lost(plain) and jobs.task_view(plain)["statusMessage"] == "Queued: waiting for a worker."
