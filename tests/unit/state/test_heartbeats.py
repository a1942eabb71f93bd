"""Reading other processes' heartbeats after a Redis stall (state/control.py): a beat that is old
because Redis could not take it is no sign of death. The stall itself, with a real Redis paused,
a real worker and daphne, is tests/integration/test_redis_faults.py; here the rounds' timing."""
import asyncio

import pytest
import redis

from mcp_transport.state import control


class Clock:
    """Stands in for the ``time`` module of control.py: a stall is the clock jumping."""

    def __init__(self):
        self.now = 10_000.0

    def monotonic(self):
        return self.now

    def time(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(control, "time", clock)
    monkeypatch.setattr(control, "_beats_readable_from", 0.0)
    monkeypatch.setattr(control, "_rounds_in_flight", {})
    return clock


def _round(monkeypatch, clock, seconds=0.0, error=None):
    """One housekeeping round whose trip to Redis takes ``seconds`` (or fails)."""
    async def beat_and_flush():
        clock.now += seconds
        if error is not None:
            raise error

    monkeypatch.setattr(control, "_beat_and_flush", beat_and_flush)
    try:
        asyncio.run(control._timed_round())
    except redis.RedisError:
        pass


def _beaten_ago(clock, seconds):
    return {"id": "1", "beat": int((clock.now - seconds) * 1000)}


def test_a_beat_missed_for_an_orphan_limit_while_redis_answered_is_a_death(monkeypatch, clock):
    _round(monkeypatch, clock, seconds=0.01)
    assert control.looks_dead(_beaten_ago(clock, control.orphan_after_ms() / 1000 + 1))
    assert not control.looks_dead(_beaten_ago(clock, control.orphan_after_ms() / 1000 - 1))


def test_a_beat_aged_by_a_stall_this_process_sat_through_is_not_a_death_until_an_orphan_limit_later(monkeypatch, clock):
    """Before: the first look after a 20 s stall (orphan limit 15 s) saw the live worker's last
    beat, written before the stall, and answered its job "The worker ... was lost"."""
    orphan_after = control.orphan_after_ms() / 1000
    _round(monkeypatch, clock, seconds=20)  # the round's reply waited for Redis to come back
    stale = _beaten_ago(clock, 20.5)
    assert not control.looks_dead(stale)
    clock.now += orphan_after - 0.1  # the live process beats again in this time
    assert not control.looks_dead(_beaten_ago(clock, 20.5 + orphan_after - 0.1))
    clock.now += 0.2
    assert control.looks_dead(_beaten_ago(clock, 20.5 + orphan_after + 0.1))  # it did not: dead


def test_no_beat_is_read_for_a_death_while_this_process_cannot_reach_redis(monkeypatch, clock):
    _round(monkeypatch, clock, seconds=2, error=redis.ConnectionError("refused"))
    clock.now += 600
    assert not control.looks_dead(_beaten_ago(clock, 600))
    _round(monkeypatch, clock, seconds=0.01)  # Redis is back: a quick round, then an orphan limit
    assert not control.looks_dead(_beaten_ago(clock, 600))
    clock.now += control.orphan_after_ms() / 1000
    assert control.looks_dead(_beaten_ago(clock, 600))


def test_no_beat_is_read_for_a_death_while_a_round_is_stuck_in_a_stall(monkeypatch, clock):
    """The look that comes first after the stall may run before the stuck round's reply is read."""
    async def scenario():
        released = asyncio.Event()

        async def beat_and_flush():
            await released.wait()

        monkeypatch.setattr(control, "_beat_and_flush", beat_and_flush)
        stuck = asyncio.ensure_future(control._timed_round())
        await asyncio.sleep(0)
        assert control.looks_dead(_beaten_ago(clock, 60))  # in flight, but only just
        clock.now += 30
        assert not control.looks_dead(_beaten_ago(clock, 60))
        released.set()
        await stuck
        assert not control.looks_dead(_beaten_ago(clock, 60))

    asyncio.run(scenario())
