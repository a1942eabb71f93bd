"""A modern (2026-07-28) long call through the tasks extension: start, poll, result.

Starts its own stack (embedded Redis, a SQLite file unless DATABASE_URL is set, one daphne
process, one Celery worker with one pool process) and measures, over raw HTTP with one client
that declares ``io.modelcontextprotocol/tasks``, for ``slow_compute`` (a background tool; its
``seconds`` of work are 0 here, so what is measured is the machinery):

- create: ``tools/call`` sent -> ``CreateTaskResult`` parsed (the job's row written, the Celery
  task sent);
- get: one ``tasks/get`` round trip on a task that is still running or done;
- result: ``tools/call`` sent -> the first ``tasks/get`` that shows ``completed`` with the
  result inlined, polling every ``--poll-ms`` (the server suggests ``pollIntervalMs`` = 1000;
  a client polling that slowly would see the end up to a second late);
- plain: the same tool called without the extension (the web process follows the job and answers
  the call itself), as the baseline.

    .venv/bin/python bench/modern_tasks.py --repeat 3
"""
import argparse
import os
import statistics
import time

from stack import example_project, percentile

from mcp_transport.testing import ModernClient

TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
CALL = {"name": "slow_compute", "arguments": {"seconds": 0, "label": "bench"}}


def result(reply):
    body = reply.json
    assert reply.status == 200 and "result" in body, (reply.status, reply.body)
    return body["result"]


def one_task(client, poll_s):
    """(create ms, [get ms], result ms, polls) of one task, polled until it completed."""
    sent = time.perf_counter()
    created = result(client.post("tools/call", CALL))
    created_at = time.perf_counter()
    assert created["resultType"] == "task", created
    gets, polls = [], 0
    while True:
        before = time.perf_counter()
        task = result(client.post("tasks/get", {"taskId": created["taskId"]}))
        gets.append((time.perf_counter() - before) * 1000)
        polls += 1
        if task["status"] == "completed":
            assert task["result"]["content"][0]["text"] == "computed bench in 0.0 s", task
            return (created_at - sent) * 1000, gets, (time.perf_counter() - sent) * 1000, polls
        assert task["status"] in ("working", "input_required"), task
        time.sleep(poll_s)


def one_plain(client):
    sent = time.perf_counter()
    done = result(client.post("tools/call", CALL))
    assert done["content"][0]["text"] == "computed bench in 0.0 s", done
    return (time.perf_counter() - sent) * 1000


def measure(url, calls, poll_s):
    tasks, plain = ModernClient(url, TASKS), ModernClient(url)
    runs = [one_task(tasks, poll_s) for _ in range(calls)]
    plains = [one_plain(plain) for _ in range(calls)]
    creates = [r[0] for r in runs]
    gets = [g for r in runs for g in r[1]]
    results = [r[2] for r in runs]
    return {"create_p50": statistics.median(creates), "create_p99": percentile(creates, 99),
            "get_p50": statistics.median(gets), "get_p99": percentile(gets, 99),
            "result_p50": statistics.median(results), "result_p99": percentile(results, 99),
            "polls": statistics.mean(r[3] for r in runs),
            "plain_p50": statistics.median(plains), "plain_p99": percentile(plains, 99)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--calls", type=int, default=50, help="tasks (and plain calls) per repeat")
    parser.add_argument("--poll-ms", type=float, default=20)
    args = parser.parse_args()
    with example_project() as (server, _worker):
        measure(server.url, 5, args.poll_ms / 1000)  # warm up both paths
        runs = [measure(server.url, args.calls, args.poll_ms / 1000) for _ in range(args.repeat)]
        print(f"load: {os.getloadavg()}; {args.calls} calls per repeat, polling every {args.poll_ms:g} ms")
        print("| | create p50 ms | p99 | tasks/get p50 ms | p99 | start -> completed seen p50 ms | p99 | polls "
              "| plain call (no extension) p50 ms | p99 |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for label, rows in (("median", None), *((f"repeat {i + 1}", [run]) for i, run in enumerate(runs))):
            rows = rows or runs
            med = {key: statistics.median(row[key] for row in rows) for key in rows[0]}
            print(f"| {label} | {med['create_p50']:.1f} | {med['create_p99']:.1f} | {med['get_p50']:.1f} | "
                  f"{med['get_p99']:.1f} | {med['result_p50']:.1f} | {med['result_p99']:.1f} | {med['polls']:.1f} | "
                  f"{med['plain_p50']:.1f} | {med['plain_p99']:.1f} |")


if __name__ == "__main__":
    main()
