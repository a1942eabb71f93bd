"""The audit trail against ordinary users (issue 38, items 6, 11 and 14a), on real processes.

Starts its own stack (embedded Redis, a SQLite file unless DATABASE_URL is set, daphne, one Celery
worker) and measures:

- ``flood``: one client floods ``tasks/cancel`` and ``tasks/update`` of its own finished task
  (2026-07-28, the tasks extension) from 4 threads for ``--seconds``: calls sent and
  state-changing rows recorded per second (a no-op changes nothing: none expected);
- ``kill``: ``--sessions`` 2025-11-25 sessions each make one state-changing call (``greet``, a
  plain tool), as many 2026-07-28 calls, then daphne is killed (SIGKILL) at once: the audit rows
  and session rows in the database; then a new daphne, each session's next request, and the
  session rows again. And ``--sessions`` sessions opened and deleted without a call: the rows
  they leave;
- ``stops``: background jobs stopped each way (2025-11-25: notifications/cancelled, DELETE,
  tasks/cancel; 2026-07-28: the client closing its call, tasks/cancel; the admin's cancel): the
  rows the audit trail has of each stop.

    .venv/bin/python bench/audit.py flood kill stops
"""
import argparse
import json
import subprocess
import sys
import threading
import time

from stack import ROOT, example_project

from mcp_transport.testing import HttpClient, LiveServer, ModernClient

TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


def shell(env, code):
    """Run ``code`` in the project's Django shell; the JSON it prints last."""
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=env, check=True,
                          capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def audit_rows(env, job_ids=None, session_ids=None, request_prefix=None):
    """The state-changing rows of the calls log naming these jobs, sessions or request ids."""
    return shell(env, f"""
import json
from mcp_transport.models import McpCall
rows = McpCall.objects.filter(changes_state=True)
if {job_ids!r} is not None: rows = rows.filter(job_id__in={job_ids!r})
if {session_ids!r} is not None: rows = rows.filter(session_id__in={session_ids!r})
if {request_prefix!r} is not None: rows = rows.filter(request_id__startswith={request_prefix!r})
print(json.dumps([[r.method, r.job_id, r.principal, r.session_id, r.status] for r in rows]))
""")


def session_rows(env, session_ids):
    return shell(env, f"""
import json
from mcp_transport.models import McpSession
print(json.dumps(McpSession.objects.filter(pk__in={session_ids!r}).count()))
""")


def result(reply):
    assert reply.status == 200 and "result" in reply.json, (reply.status, reply.body)
    return reply.json["result"]


# -- flood ------------------------------------------------------------------------------------

def flood(server, env, seconds):
    client = ModernClient(server.url, TASKS)
    task = result(client.post("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}}))["taskId"]
    while result(client.post("tasks/get", {"taskId": task}))["status"] != "completed":
        time.sleep(0.05)
    sent, stop = [], threading.Event()

    def send():
        mine = ModernClient(server.url, TASKS)
        while not stop.is_set():
            mine.post("tasks/cancel", {"taskId": task})
            mine.post("tasks/update", {"taskId": task, "inputResponses": {"x": {"action": "accept"}}})
            sent.append(2)
    threads = [threading.Thread(target=send) for _ in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    time.sleep(2.5)  # the calls log writes its batch every second
    rows = [row for row in audit_rows(env, job_ids=[task]) if row[0] != "tools/call"]  # not the task's own
    calls = sum(sent)
    print(f"flood: {calls} no-op tasks/cancel + tasks/update in {seconds} s ({calls / seconds:.0f}/s): "
          f"{len(rows)} state-changing rows ({len(rows) / seconds:.0f} rows/s)")


# -- kill -9 ----------------------------------------------------------------------------------

def one_call(url, index):
    client = HttpClient(url)
    client.initialize()
    reply = client.call("tools/call", {"name": "greet", "arguments": {"name": f"s{index}"}})
    assert reply["result"]["content"][0]["text"] == f"Hello, s{index}!", reply
    return client


def kill(server, env, count):
    tag = f"kill-{time.monotonic_ns()}"
    clients = [one_call(server.url, index) for index in range(count)]
    modern = ModernClient(server.url)
    for index in range(count):
        result(modern.post("tools/call", {"name": "greet", "arguments": {"name": "m"}}, request_id=f"{tag}-{index}"))
    server.kill()  # SIGKILL right after the last answer
    ids = [client.session_id for client in clients]
    legacy, stateless = audit_rows(env, session_ids=ids), audit_rows(env, request_prefix=tag)
    before_use = session_rows(env, ids)
    restarted = LiveServer(env=server.env, cwd=ROOT).start()
    try:
        for client in clients:
            assert client.on(restarted.url).call("ping")["result"] == {}
        deadline = time.monotonic() + 10
        while (after_use := session_rows(env, ids)) < count and time.monotonic() < deadline:
            time.sleep(0.2)
        churn = []
        for _ in range(count):
            client = HttpClient(restarted.url)
            client.initialize()
            assert client.delete().status == 200
            churn.append(client.session_id)
        time.sleep(2)
        left = session_rows(env, churn)
    finally:
        restarted.stop()
    print(f"kill -9 after {count} sessions x 1 state-changing call: {len(legacy)} of {count} audit rows, "
          f"{before_use} of {count} session rows; 2026-07-28: {len(stateless)} of {count} audit rows")
    print(f"after a restart and each session's next request: {after_use} of {count} session rows")
    print(f"{count} sessions opened and deleted without a call: {left} rows kept")


# -- job stops --------------------------------------------------------------------------------

def job_of(env, session_id):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = shell(env, f"""
import json
from mcp_transport.models import McpJob
print(json.dumps(list(McpJob.objects.filter(session_id={session_id!r}).values_list("id", flat=True))))
""")
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError("no job")


def status_of(env, job_id):
    return shell(env, f"""
import json
from mcp_transport.models import McpJob
print(json.dumps(McpJob.objects.get(pk={job_id!r}).status))
""")


def until_cancelled(env, job_id):
    deadline = time.monotonic() + 30
    while status_of(env, job_id) != "cancelled":
        assert time.monotonic() < deadline, job_id
        time.sleep(0.1)


SLOW = {"name": "slow_job", "arguments": {"steps": 200, "interval_ms": 100}, "_meta": {"progressToken": "p"}}


def started_legacy(url, capabilities=None):
    client = HttpClient(url)
    client.initialize(capabilities=capabilities)
    message = client.message("tools/call", SLOW)
    stream = client.stream("POST", message)
    stream.next_message(timeout=30)  # the first progress: it runs
    return client, stream, message["id"]


def stops(server, env):
    found = {}
    # 2025-11-25: notifications/cancelled
    client, stream, request_id = started_legacy(server.url)
    job = job_of(env, client.session_id)
    client.request("POST", client.message("notifications/cancelled", {"requestId": request_id}, request_id=False))
    until_cancelled(env, job)
    found["2025 notifications/cancelled"] = job
    stream.close()
    # 2025-11-25: DELETE
    client, stream, _ = started_legacy(server.url)
    job = job_of(env, client.session_id)
    assert client.delete().status == 200
    until_cancelled(env, job)
    found["2025 DELETE"] = job
    stream.close()
    # 2025-11-25: tasks/cancel
    client = HttpClient(server.url)
    client.initialize(capabilities={"tasks": {}})
    created = client.call("tools/call", {**SLOW, "task": {}})["result"]["task"]["taskId"]
    assert "result" in client.call("tasks/cancel", {"taskId": created})
    found["2025 tasks/cancel"] = created
    # 2026-07-28: the client closes its call's response
    modern = ModernClient(server.url)
    stream = modern.open("tools/call", SLOW, request_id="stop-disconnect")
    stream.next_message(timeout=30)
    job = shell(env, """
import json
from mcp_transport.models import McpJob
print(json.dumps(McpJob.objects.filter(request_id="stop-disconnect").order_by("-created_at")[0].id))
""")
    stream.close()
    until_cancelled(env, job)
    found["2026 disconnect"] = job
    # 2026-07-28: tasks/cancel
    tasks = ModernClient(server.url, TASKS)
    created = result(tasks.post("tools/call", {"name": "slow_compute", "arguments": {"seconds": 30}}))["taskId"]
    result(tasks.post("tasks/cancel", {"taskId": created}))
    found["2026 tasks/cancel"] = created
    # the admin's cancel (jobs.cancel, the admin action's path)
    client, stream, _ = started_legacy(server.url)
    job = job_of(env, client.session_id)
    shell(env, f"import json\nfrom mcp_transport.running import jobs\nprint(json.dumps(jobs.cancel({job!r})))")
    found["admin cancel"] = job
    stream.close()
    time.sleep(2.5)  # the calls log writes its batch every second
    for kind, job in found.items():
        rows = [row for row in audit_rows(env, job_ids=[job]) if row[0] != "tools/call"]
        print(f"{kind}: {len(rows)} audit row(s) of the stop {rows}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", nargs="+", choices=("flood", "kill", "stops"))
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--sessions", type=int, default=100)
    args = parser.parse_args()
    for what in args.what:
        with example_project() as (server, _worker):
            env = server.env
            if what == "flood":
                flood(server, env, args.seconds)
            elif what == "kill":
                kill(server, env, args.sessions)
            else:
                stops(server, env)


if __name__ == "__main__":
    main()
