"""Background tools: how fast a Celery worker's progress reaches the client.

Starts its own stack (embedded Redis, a SQLite file, one daphne process, one Celery worker
with one pool process) and measures, over raw HTTP with one client:

- latency: the time from the worker's ``report_progress`` (its message carries ``time.time()``)
  to the client having parsed the event (same machine, same clock), p50 and p99;
- throughput: progress events per second one worker streams to one client (no sleep between
  reports);
- start: the time from the client sending ``tools/call`` to the first progress event (enqueue,
  pickup by the worker, first report).

The same tool run inline in the web process (``stamp_inline``) is measured side by side as the
baseline. ``--repeat`` runs interleave both. The database is ``DATABASE_URL`` if set (else a
SQLite file): jobs write rows when they are submitted, start and end.

    .venv/bin/python bench/jobs.py --repeat 3
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench .venv/bin/python bench/jobs.py
"""
import argparse
import json
import os
import statistics
import time

from stack import example_project, percentile

from mcp_transport.testing import HttpClient


def call(client, tool, steps, interval_ms):
    """(send time, [(receive time, progress message)]) of one call, read to its end."""
    message = client.message("tools/call", {"name": tool, "arguments": {"steps": steps, "interval_ms": interval_ms},
                                            "_meta": {"progressToken": 1}})
    sent = time.time()
    stream = client.stream("POST", message)
    received = []
    while (event := stream.next_event(timeout=60)) is not None:
        if event.data:
            data = json.loads(event.data)
            if data.get("method") == "notifications/progress":
                received.append((time.time(), data["params"]["message"]))
    assert len(received) == steps, (tool, len(received), steps)
    return sent, received


def measure(client, tool):
    _sent, events = call(client, tool, steps=300, interval_ms=2)
    latencies = [(at - float(stamp)) * 1000 for at, stamp in events]
    _sent, burst = call(client, tool, steps=5000, interval_ms=0)
    rate = (len(burst) - 1) / (burst[-1][0] - burst[0][0])
    starts = []
    for _ in range(20):
        sent, first = call(client, tool, steps=1, interval_ms=0)
        starts.append((first[0][0] - sent) * 1000)
    return {"p50": statistics.median(latencies), "p99": percentile(latencies, 99), "rate": rate,
            "start_p50": statistics.median(starts), "start_p99": percentile(starts, 99)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with example_project() as (server, _worker):
        client = HttpClient(server.url)
        client.initialize()
        call(client, "stamp_job", 10, 0)  # warm up both paths
        call(client, "stamp_inline", 10, 0)
        rows = {"worker (stamp_job)": [], "inline (stamp_inline)": []}
        for _ in range(args.repeat):
            for label, tool in (("worker (stamp_job)", "stamp_job"), ("inline (stamp_inline)", "stamp_inline")):
                rows[label].append(measure(client, tool))
        print(f"load: {os.getloadavg()}")
        print("| path | report->client p50 ms | p99 ms | events/s one client | call->first progress p50 ms | p99 ms |")
        print("|---|---|---|---|---|---|")
        for label, runs in rows.items():
            med = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
            print(f"| {label} | {med['p50']:.2f} | {med['p99']:.2f} | {med['rate']:.0f} | "
                  f"{med['start_p50']:.1f} | {med['start_p99']:.1f} |")
            for run in runs:
                print(f"|   repeat | {run['p50']:.2f} | {run['p99']:.2f} | {run['rate']:.0f} | "
                      f"{run['start_p50']:.1f} | {run['start_p99']:.1f} |")


if __name__ == "__main__":
    main()
