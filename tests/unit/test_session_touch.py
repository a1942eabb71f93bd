"""A session's last use is bookkeeping: a request whose turn it is to write it does not fail when
the database is unreachable (bench/chaos.py's database cut: such a call answered 500)."""
import asyncio
import time

from django.db import OperationalError

from mcp_transport.state import sessions


class Unreachable:
    def update(self, **fields):
        raise OperationalError("connection failed: server closed the connection unexpectedly")


def test_a_session_due_for_its_last_use_write_is_served_while_the_database_is_away(monkeypatch, caplog):
    async def nothing(*args):
        return None

    monkeypatch.setattr(sessions, "_cache", nothing)
    monkeypatch.setattr(sessions, "_extend_side_keys", nothing)
    monkeypatch.setattr(sessions.McpSession.objects, "filter", lambda **lookup: Unreachable())
    due = sessions.SessionRecord(id="s1", protocol_version="2025-11-25",
                                 seen_written=time.time() - sessions.LAST_SEEN_WRITE_INTERVAL - 1)
    loaded = asyncio.run(sessions._loaded("s1", due.to_json()))
    assert loaded.id == "s1" and loaded.seen_written > due.seen_written
    assert "the database is unreachable" in caplog.text
