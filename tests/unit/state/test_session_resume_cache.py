"""sessions.load_for_resume: a process's own recent load of a session, for a fast resume."""
import asyncio

import pytest

from mcp_transport.state import sessions


@pytest.fixture
def clock(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(sessions.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(sessions, "_resumable", {})
    return now


@pytest.fixture
def loads(monkeypatch):
    """The ids load() was asked for (it answers None: unknown everywhere else)."""
    asked = []

    async def load(session_id):
        asked.append(session_id)

    monkeypatch.setattr(sessions, "load", load)
    return asked


def record(session_id="s1"):
    return sessions.SessionRecord(id=session_id, protocol_version="2025-11-25")


def test_a_remembered_session_is_served_without_a_load(clock, loads):
    remembered = record()
    sessions.remember_for_resume(remembered)
    clock[0] += sessions.RESUMABLE_FOR_SECONDS
    assert asyncio.run(sessions.load_for_resume("s1")) is remembered
    assert loads == []


def test_after_its_time_or_once_closed_the_session_is_loaded_again(clock, loads):
    sessions.remember_for_resume(record("old"))
    sessions.remember_for_resume(record("closed"))
    sessions.forget("closed")
    clock[0] += sessions.RESUMABLE_FOR_SECONDS + 0.1
    assert asyncio.run(sessions.load_for_resume("old")) is None
    assert asyncio.run(sessions.load_for_resume("closed")) is None
    assert loads == ["old", "closed"]


def test_old_and_surplus_sessions_are_dropped_as_new_ones_come(clock, monkeypatch):
    monkeypatch.setattr(sessions, "RESUMABLE_MAX", 3)
    sessions.remember_for_resume(record("stale"))
    clock[0] += sessions.RESUMABLE_FOR_SECONDS + 1
    for name in ("a", "b", "c", "d"):
        sessions.remember_for_resume(record(name))
    assert list(sessions._resumable) == ["b", "c", "d"]
    sessions.remember_for_resume(record("b"))  # remembered again: now the newest
    assert list(sessions._resumable) == ["c", "d", "b"]
