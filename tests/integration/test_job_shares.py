"""Each caller's share of the Celery workers (MAX_RUNNING_JOBS_PER_CALLER, jobs/shares.py): one
caller's long background jobs queue behind its own, not everyone's (issue 30, class 2).

Before, a user with a few long background calls (``book_list_all`` with a long search, ~48 s a
job) held every slot of a two-process worker, and another user's short background call waited
45.8 s. Here, on real daphne, Redis and a Celery worker of two pool processes (its own queue),
with MCP_AUTH on: the hog sends three long calls, and the victim's short call must be answered
while every one of the hog's jobs is still there, one of them running and the third one still
queued. Conditions in the database, not timing margins: the wait is printed (``-s``) for the
record. Both eras: 2025-11-25 sessions and 2026-07-28 tasks and plain calls.
"""
import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcp_transport.testing import HttpClient, LiveWorker, ModernClient

ROOT = Path(__file__).resolve().parents[2]
#: For a loaded machine: how long a condition may take, not a measured figure.
DEADLINE = 120.0
#: 2400 x 50 ms: each of the hog's jobs holds its slot for 120 s or more, far beyond how long a
#: loaded machine takes to serve the victim (every test cancels them when done).
LONG = {"name": "slow_job", "arguments": {"steps": 2400, "interval_ms": 50}}
SHORT = {"name": "slow_job", "arguments": {"steps": 1, "interval_ms": 1}}
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
#: Taken by the worker: running, or waiting for one of its caller's jobs (outcome.CALLER_BUSY).
TAKEN = "sum(r['status'] == 'working' or r['message'].startswith('Queued: its caller') for r in rows)"


@pytest.fixture(scope="module")
def server(start_server, own_queue, server_env):
    """A daphne with MCP_AUTH on and a worker of two pool processes (MAX_RUNNING_JOBS_PER_CALLER's
    default: all but one of them, so 1), on a queue of their own."""
    started = start_server(MCP_AUTH="on", CELERY_QUEUE=own_queue)
    worker = LiveWorker(queue=own_queue, cwd=ROOT, concurrency=2,
                        env={**server_env, "CELERY_QUEUE": own_queue, "LOG_LEVEL": "INFO",
                             "MCP_TRANSPORT_JSON": json.dumps({"HEARTBEAT_SECONDS": 0.3})}).start()
    yield started
    worker.stop()


def manage(server_env, *args) -> str:
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env={**os.environ, **server_env},
                          capture_output=True, text=True, timeout=DEADLINE)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def user_with_token(server_env, role) -> tuple:
    """A new user and a bearer token of theirs: (username, token)."""
    name = f"{role}-{secrets.token_hex(4)}"
    return name, manage(server_env, "mcp_tokens", "create", "--user", name).strip().splitlines()[-1]


_ROWS = """
import json, time
from mcp_transport.models import McpJob
end = time.monotonic() + {deadline}
while True:
    rows = [{{"status": j.status, "message": j.message, "error": j.error,
              "started": j.started_at and j.started_at.timestamp(),
              "finished": j.finished_at and j.finished_at.timestamp()}}
            for j in McpJob.objects.filter(user__username={user!r}).order_by("created_at")]
    if ({condition}) or time.monotonic() > end:
        break
    time.sleep(0.1)
print(json.dumps(rows))
"""


def jobs_of(server_env, user, condition="True") -> list:
    """The user's jobs, oldest first, once ``condition`` (over ``rows``) holds (or after DEADLINE)."""
    code = _ROWS.format(deadline=DEADLINE, user=user, condition=condition)
    return json.loads(manage(server_env, "shell", "-c", code).strip().splitlines()[-1])


def answer_of(stream, request_id) -> dict:
    """The response to ``request_id``, as JSON or on an SSE stream, however long it takes to come."""
    if stream.headers.get("content-type", "").startswith("application/json"):
        body = stream.response.read()
        stream.close()
        return json.loads(body)
    while (event := stream.next_event(timeout=DEADLINE)) is not None:
        message = json.loads(event.data) if event.data else {}
        if message.get("id") == request_id and "method" not in message:
            stream.close()
            return message
    raise AssertionError(f"the stream ended without the response: {stream.raw[-2000:]!r}")


def assert_victim_served_first(rows, waited):
    print(f"\nthe victim's short background call waited {waited:.2f} s; the hog's jobs then: "
          f"{[row['status'] for row in rows]}")
    # The victim's answer came while every one of the hog's jobs was still there ...
    assert [row["finished"] for row in rows] == [None, None, None], rows
    # ... one running, the others waiting behind it, the third in particular.
    assert [row["status"] for row in rows].count("working") == 1, rows
    assert rows[2]["status"] == "queued" and rows[2]["started"] is None, rows


def test_another_callers_short_call_runs_while_a_hogs_long_calls_wait_2025(server, server_env):
    hog_name, hog_token = user_with_token(server_env, "hog")
    victim_name, victim_token = user_with_token(server_env, "victim")
    hog = HttpClient(server.url, token=hog_token)
    hog.initialize()
    hog_streams = [hog.stream("POST", hog.message("tools/call", LONG), timeout=DEADLINE) for _ in range(3)]
    jobs_of(server_env, hog_name, f"len(rows) == 3 and {TAKEN} >= 2")  # the worker has seen them

    victim = HttpClient(server.url, token=victim_token)
    victim.initialize()
    started = time.monotonic()
    call = victim.message("tools/call", SHORT)
    reply = answer_of(victim.stream("POST", call, timeout=DEADLINE), call["id"])
    waited = time.monotonic() - started
    rows = jobs_of(server_env, hog_name)
    assert reply["result"]["content"][0]["text"] == "done 1", reply
    assert jobs_of(server_env, victim_name)[0]["status"] == "completed"
    try:
        assert_victim_served_first(rows, waited)
    finally:
        assert hog.delete().status == 200  # the session's jobs are cancelled
        for stream in hog_streams:
            stream.close()
        jobs_of(server_env, hog_name, "all(r['finished'] for r in rows)")


def test_another_callers_short_call_runs_while_a_hogs_long_tasks_wait_2026(server, server_env):
    hog_name, hog_token = user_with_token(server_env, "hog")
    _victim_name, victim_token = user_with_token(server_env, "victim")
    hog = ModernClient(server.url, TASKS)
    hog.token = hog_token
    tasks = []
    for _ in range(3):
        reply = hog.post("tools/call", LONG)
        assert reply.status == 200 and reply.json["result"]["resultType"] == "task", reply.body
        tasks.append(reply.json["result"]["taskId"])
    jobs_of(server_env, hog_name, f"len(rows) == 3 and {TAKEN} >= 2")

    victim = ModernClient(server.url)
    victim.token = victim_token
    started = time.monotonic()
    stream = victim.open("tools/call", SHORT, request_id=7, timeout=DEADLINE)
    reply = answer_of(stream, 7)
    waited = time.monotonic() - started
    rows = jobs_of(server_env, hog_name)
    try:
        assert reply["result"]["content"][0]["text"] == "done 1", reply
        assert_victim_served_first(rows, waited)
        # The hog's client sees its third task still queued ("working" to clients: tasks begin there).
        third = hog.post("tasks/get", {"taskId": tasks[2]}).json["result"]
        assert third["status"] == "working" and third["statusMessage"].startswith("Queued"), third
    finally:
        for task_id in tasks:
            hog.post("tasks/cancel", {"taskId": task_id})
        jobs_of(server_env, hog_name, "all(r['finished'] for r in rows)")


def test_a_callers_jobs_run_one_after_another_in_the_order_sent(server, server_env):
    """Over its share, a caller's jobs wait their turn: each starts once the one before it ended
    (its place given back wakes the next at once), in the order sent, and none is lost."""
    name, token = user_with_token(server_env, "queue")
    client = ModernClient(server.url, TASKS)
    client.token = token
    for _ in range(4):
        reply = client.post("tools/call", {"name": "slow_job", "arguments": {"steps": 10, "interval_ms": 50}})
        assert reply.json["result"]["resultType"] == "task", reply.body
    rows = jobs_of(server_env, name, "len(rows) == 4 and all(r['finished'] for r in rows)")
    assert [row["status"] for row in rows] == ["completed"] * 4, rows
    for before, after in zip(rows, rows[1:]):
        assert after["started"] >= before["finished"], rows


def test_a_waiting_job_cancelled_never_starts_and_the_next_one_takes_its_turn(server, server_env):
    name, token = user_with_token(server_env, "cancel")
    client = ModernClient(server.url, TASKS)
    client.token = token
    first, second = (client.post("tools/call", LONG).json["result"]["taskId"] for _ in range(2))
    jobs_of(server_env, name, f"len(rows) == 2 and {TAKEN} == 2")
    assert client.post("tasks/cancel", {"taskId": second}).status == 200
    third = client.post("tools/call", SHORT).json["result"]["taskId"]
    assert client.post("tasks/cancel", {"taskId": first}).status == 200
    rows = jobs_of(server_env, name, "len(rows) == 3 and all(r['finished'] for r in rows)")
    assert [row["status"] for row in rows] == ["cancelled", "cancelled", "completed"], rows
    assert rows[1]["started"] is None, rows  # cancelled while it waited: it never ran
    assert client.post("tasks/get", {"taskId": third}).json["result"]["status"] == "completed"
