#!/usr/bin/env python
"""Event store micro-benchmark: appends per second by one process, and replay latency.

    .venv/bin/python bench/append.py [--streams 50] [--events 400] [--persist batched] [--repeat 3]

Uses ``REDIS_URL`` when set, otherwise an embedded redis-server; the database is a throwaway
SQLite file (migrated here) unless ``DATABASE_URL`` is set. One event loop appends ``--events``
events to each of ``--streams`` streams, the streams concurrently (asyncio.gather), each stream's
events one after another, as a request task does. Reported: events/s over the wall time of the
appends, append latency p50/p99, the time the flusher then needs to get the last rows into the
database, and the replay of 100 buffered events (``replay_after`` of a stream's first event).

``--mode per-append`` sends one script call per append (no coalescing), for comparison.
Prints one JSON line per repeat, then a summary line.
"""
import argparse
import asyncio
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def setup_environment():
    if not os.environ.get("REDIS_URL"):
        from mcpserver.embedded_redis import EmbeddedRedis

        os.environ["REDIS_URL"] = EmbeddedRedis().start().url
    if not os.environ.get("DATABASE_URL"):
        os.environ["DATABASE_URL"] = f"sqlite:///{tempfile.mkdtemp(prefix='mcpbench-')}/events.sqlite3"
    os.environ.setdefault("MCP_KEY_PREFIX", f"mcpbench{secrets.token_hex(3)}")
    os.environ["DJANGO_SETTINGS_MODULE"] = "mcpserver.settings"
    os.environ.setdefault("DJANGO_SECRET_KEY", secrets.token_urlsafe(50))  # DEBUG off needs one
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def percentile(values, share):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def append_stream(store, append, session_id, stream_key, events, latencies):
    for i in range(events):
        message = {"jsonrpc": "2.0", "method": "notifications/progress",
                   "params": {"progressToken": "p", "progress": i, "total": events, "message": f"step {i}"}}
        started = time.perf_counter()
        await append(session_id, stream_key, message)
        latencies.append(time.perf_counter() - started)


def appender(store, mode):
    if mode == "coalesced":
        return store.append
    from mcp_transport.protocol.jsonrpc import dumps
    from mcp_transport.storage.redis import _Append

    async def one_call(session_id, stream_key, message):  # one script call per append
        return (await store._send([_Append(session_id, stream_key, False, dumps(message))]))[0]

    return one_call


async def measure_appends(store, args):
    from mcp_transport.protocol.ids import new_session_id, new_stream_key

    session_id, latencies = new_session_id(), []
    append = appender(store, args.mode)
    started = time.perf_counter()
    await asyncio.gather(*(append_stream(store, append, session_id, new_stream_key(), args.events, latencies)
                           for _ in range(args.streams)))
    wall = time.perf_counter() - started
    flush_started = time.perf_counter()
    await store.flush()
    drain = time.perf_counter() - flush_started
    rows = await rows_of(store, session_id)
    await store.delete_session(session_id)
    return {"events": len(latencies), "wall_s": round(wall, 3), "events_per_s": round(len(latencies) / wall),
            "append_p50_ms": round(percentile(latencies, 0.5) * 1000, 3),
            "append_p99_ms": round(percentile(latencies, 0.99) * 1000, 3), "flush_after_s": round(drain, 3),
            "rows_in_database": rows}


async def rows_of(store, session_id):
    if store.table is None:
        return 0
    from mcp_transport.storage.persist import all_rows

    return await store.table.run(lambda: all_rows().filter(session_id=session_id).count())


async def measure_replay(store, rounds=200):
    from mcp_transport.protocol.ids import new_session_id, new_stream_key

    session_id, stream_key = new_session_id(), new_stream_key()
    first = await store.append(session_id, stream_key, None)
    for i in range(100):
        await store.append(session_id, stream_key, {"jsonrpc": "2.0", "method": "notifications/progress",
                                                    "params": {"progressToken": "p", "progress": i}})
    timings = []
    for _ in range(rounds):
        started = time.perf_counter()
        events = await store.replay_after(session_id, first)
        timings.append(time.perf_counter() - started)
        assert len(events) == 100
    await store.delete_session(session_id)
    return {"replay100_p50_ms": round(percentile(timings, 0.5) * 1000, 3),
            "replay100_p99_ms": round(percentile(timings, 0.99) * 1000, 3)}


async def run(args):
    from mcp_transport.storage.redis import RedisEventStore

    store = RedisEventStore(persist=args.persist)
    await measure_appends(store, argparse.Namespace(**{**vars(args), "events": 20}))  # warm-up
    results = []
    for repeat in range(args.repeat):
        result = {"repeat": repeat + 1, "mode": args.mode, "persist": args.persist, "streams": args.streams,
                  **await measure_appends(store, args), **await measure_replay(store)}
        print(json.dumps(result), flush=True)
        results.append(result)
    print(json.dumps({"summary": True, "mode": args.mode, "persist": args.persist,
                      "events_per_s_median": statistics.median(r["events_per_s"] for r in results),
                      "append_p50_ms_median": statistics.median(r["append_p50_ms"] for r in results),
                      "append_p99_ms_median": statistics.median(r["append_p99_ms"] for r in results),
                      "replay100_p50_ms_median": statistics.median(r["replay100_p50_ms"] for r in results)}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=50)
    parser.add_argument("--events", type=int, default=400, help="events per stream")
    parser.add_argument("--persist", default="batched", choices=["batched", "write_through", "off"])
    parser.add_argument("--mode", default="coalesced", choices=["coalesced", "per-append"])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    setup_environment()
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
