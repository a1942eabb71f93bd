#!/usr/bin/env python
"""The retention cleanup at scale: how long one ``operations.cleanup()`` run takes.

    .venv/bin/python bench/cleanup.py [--sessions 10000] [--events 10] [--old-events 100000] [--repeat 1]

Environment as bench/append.py (``REDIS_URL``, ``DATABASE_URL``; otherwise embedded Redis and a
throwaway SQLite file). Each repeat makes, in bulk: ``--sessions`` open session rows idle for two
hours that Redis no longer has (the expired-without-DELETE case), ``--events`` event rows each,
and ``--old-events`` event rows two days old of sessions that are still fresh; then times one
cleanup run, which must close every session and delete every one of those rows. One JSON line per
repeat.
"""
import argparse
import json
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from append import setup_environment  # noqa: E402


def make_rows(sessions, events, old_events):
    from django.utils import timezone

    from mcp_transport.models import McpSession, StoredEvent
    from mcp_transport.protocol.ids import new_session_id

    now = timezone.now()
    expired = [new_session_id() for _ in range(sessions)]
    McpSession.objects.bulk_create([McpSession(id=session_id, state="ready", protocol_version="2025-11-25",
                                               last_seen_at=now - timedelta(hours=2)) for session_id in expired],
                                   batch_size=2000)
    fresh = new_session_id()
    McpSession.objects.create(id=fresh, state="ready", protocol_version="2025-11-25", last_seen_at=now)
    rows = [StoredEvent(session_id=session_id, stream="s", position=f"{i}-0", position_ms=i, position_seq=0,
                        message={"jsonrpc": "2.0", "method": "notifications/progress"})
            for session_id in expired for i in range(1, events + 1)]
    rows += [StoredEvent(session_id=fresh, stream="old", position=f"{i}-0", position_ms=i, position_seq=0)
             for i in range(1, old_events + 1)]
    StoredEvent.objects.bulk_create(rows, batch_size=5000)
    StoredEvent.objects.filter(session_id=fresh).update(created_at=now - timedelta(days=2))
    return fresh


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=10)
    parser.add_argument("--old-events", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    setup_environment()
    from asgiref.sync import async_to_sync
    from django.db import connection

    from mcp_transport import operations
    from mcp_transport.models import McpSession, StoredEvent

    for _ in range(args.repeat):
        McpSession.objects.all().delete()
        StoredEvent.objects.all().delete()
        made = time.perf_counter()
        make_rows(args.sessions, args.events, args.old_events)
        started = time.perf_counter()
        report = async_to_sync(operations.cleanup)()
        took = time.perf_counter() - started
        assert report.sessions_expired == args.sessions, report
        assert StoredEvent.objects.count() == 0 and McpSession.objects.filter(state="ready").count() == 1
        print(json.dumps({"database": connection.vendor, **vars(args), **report.as_dict(),
                          "setup_s": round(started - made, 2), "cleanup_s": round(took, 2),
                          "sessions_per_s": round(args.sessions / took),
                          "old_events_per_s": round(args.old_events / took)}), flush=True)


if __name__ == "__main__":
    main()
