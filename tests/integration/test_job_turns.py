"""A freed Celery slot goes to the caller running the fewest jobs, not to whichever hog's job
comes next (issue 38, class 4; running/jobs/shares.py).

Before, with a worker of two pool processes, two users' long jobs held both slots (one each:
MAX_RUNNING_JOBS_PER_CALLER's default), and their next jobs, sent before a third user's short
job, took the slots they freed ahead of it: it waited a whole generation of long jobs (77 s
behind 40 s jobs; here: 8 s jobs, and the victim's started 13 s after it was sent, as the
hogs' third jobs did).

Here, on a real daphne, Redis and a Celery worker of two pool processes (a queue of its own),
callers told apart by their address: each hog sends three long jobs; once their first jobs run,
a third caller sends a short one, in a 2025-11-25 session. The test cancels the first hog's
running job: the slot it frees must run the victim's job before either hog's second one.
Conditions on the rows' start times, not timing margins.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_transport.testing import LiveWorker

from .addresses import ClientAt, ModernClientAt

ROOT = Path(__file__).resolve().parents[2]
#: For a loaded machine: how long a condition may take, not a measured figure.
DEADLINE = 120.0
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
#: 2400 x 50 ms: a hog's job holds its slot for 120 s or more, unless the test cancels it.
LONG = {"name": "slow_job", "arguments": {"steps": 2400, "interval_ms": 50}}
SHORT = {"name": "slow_job", "arguments": {"steps": 1, "interval_ms": 1}}
HOGS, VICTIM = ("10.38.4.1", "10.38.4.2"), "10.38.4.3"


@pytest.fixture(scope="module")
def server(start_server, own_queue, server_env):
    """A daphne trusting the test's X-Forwarded-For and a worker of two pool processes, on a
    queue of their own."""
    settings = json.dumps({"TRUSTED_PROXIES": ["127.0.0.1"]})
    started = start_server(CELERY_QUEUE=own_queue, MCP_TRANSPORT_JSON=settings)
    worker = LiveWorker(queue=own_queue, cwd=ROOT, concurrency=2,
                        env={**server_env, "CELERY_QUEUE": own_queue, "LOG_LEVEL": "INFO",
                             "MCP_TRANSPORT_JSON": json.dumps({"HEARTBEAT_SECONDS": 0.3})}).start()
    yield started
    worker.stop()


class CallerAt(ModernClientAt):
    """A 2026-07-28 client with the tasks extension, at ``address`` (X-Forwarded-For)."""

    def __init__(self, url, address):
        super().__init__(url, address, TASKS)

    def task(self, call) -> str:
        reply = self.post("tools/call", call)
        assert reply.status == 200 and reply.json["result"]["resultType"] == "task", reply.body
        return reply.json["result"]["taskId"]


_ROWS = """
import json, time
from mcp_transport.models import McpJob
end = time.monotonic() + {deadline}
while True:
    rows = {{j.id: {{"status": j.status, "message": j.message, "started": j.started_at and j.started_at.timestamp(),
                    "finished": j.finished_at and j.finished_at.timestamp()}}
            for j in McpJob.objects.filter(id__in={ids!r})}}
    met = len(rows) == {count} and ({condition})
    if met or time.monotonic() > end:
        break
    time.sleep(0.1)
print(json.dumps([met, rows]))
"""


def rows_of(server_env, ids, condition="True") -> dict:
    """The jobs ``ids`` (job id -> its row's status, message, start and end) once ``condition``
    (over ``rows``) holds, which it must within DEADLINE."""
    code = _ROWS.format(deadline=DEADLINE, ids=list(ids), count=len(set(ids)), condition=condition)
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, **server_env}, timeout=DEADLINE + 60)
    assert done.returncode == 0, done.stdout + done.stderr
    met, rows = json.loads(done.stdout.strip().splitlines()[-1])
    assert met, f"waited {DEADLINE:g} s for {condition}: {rows}"
    return rows


def test_a_freed_slot_runs_a_third_callers_job_before_either_hogs_second_one(server, server_env):
    hogs = [CallerAt(server.url, address) for address in HOGS]
    sent = [[hog.task(LONG) for hog in hogs] for _ in range(3)]  # first, second and third jobs
    firsts, seconds = sent[0], sent[1]
    rows_of(server_env, firsts, "all(r['status'] == 'working' for r in rows.values())")
    victim = ClientAt(server.url, VICTIM)
    victim.initialize()
    call = victim.stream("POST", victim.message("tools/call", SHORT), timeout=DEADLINE)
    everyone = [job for jobs in sent for job in jobs]
    try:
        rows_of(server_env, everyone, f"len(McpJob.objects.filter(session_id={victim.session_id!r})) == 1")
        assert hogs[0].post("tasks/cancel", {"taskId": firsts[0]}).status == 200  # a slot comes free
        answer = [message for message in call.messages(timeout=DEADLINE) if "result" in message]
        assert answer and answer[0]["result"]["content"][0]["text"] == "done 1", call.raw
        short = victim_job(server_env, victim.session_id)
        rows = rows_of(server_env, [*everyone, short])
        print(f"\nthe victim's short job started {rows[short]['started'] - rows[firsts[0]]['finished']:.2f} s "
              f"after the first hog's job ended; the hogs' second jobs: {[rows[job]['status'] for job in seconds]}")
        for second in seconds:
            assert rows[second]["started"] is None or rows[second]["started"] > rows[short]["started"], rows
    finally:
        call.close()
        victim.delete()
        for hog, mine in zip(hogs, zip(*sent)):
            for task_id in mine:
                hog.post("tasks/cancel", {"taskId": task_id})
        rows_of(server_env, everyone, "all(r['finished'] for r in rows.values())")  # none left running


def victim_job(server_env, session_id) -> str:
    code = f"from mcp_transport.models import McpJob; print(McpJob.objects.get(session_id={session_id!r}).id)"
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, **server_env}, timeout=DEADLINE)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip().splitlines()[-1]
