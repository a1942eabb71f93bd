"""A session's last use is bookkeeping: a request whose turn it is to write it does not fail when
the database is unreachable (bench/chaos.py's database cut: such a call answered 500). The write
is handed to the session rows' writer (state/session_rows.py), which retries it off the request
path, so the request never meets the database."""
import asyncio
import time

from mcp_transport.state import sessions


class Writer:
    def __init__(self):
        self.changes = []

    def change(self, record, fields):
        self.changes.append((record.id, tuple(fields)))


def test_a_session_due_for_its_last_use_write_is_served_without_the_database(monkeypatch):
    async def nothing(*args):
        return None

    writer = Writer()
    monkeypatch.setattr(sessions, "_cache", nothing)
    monkeypatch.setattr(sessions, "_extend_side_keys", nothing)
    monkeypatch.setattr(sessions.session_rows, "writer", lambda: writer)
    due = sessions.SessionRecord(id="s1", protocol_version="2025-11-25",
                                 seen_written=time.time() - sessions.LAST_SEEN_WRITE_INTERVAL - 1)
    # No django_db mark: any database access on this path fails the test.
    loaded = asyncio.run(sessions._loaded("s1", due.to_json()))
    assert loaded.id == "s1" and loaded.seen_written > due.seen_written
    assert writer.changes == [("s1", ("seen_written",))]
