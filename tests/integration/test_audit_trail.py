"""The audit trail against ordinary users (issue 38, items 6, 11 and 14a), on real daphne
processes, a Celery worker and the run's database (PostgreSQL on CI), with ``MCP_AUTH=on`` so
that every row names its principal:

- a ``tasks/cancel`` or ``tasks/update`` that changes nothing (its task had ended) is no
  state-changing row; one that stops a task is. Before: each no-op was one, never sampled or
  capped (613 rows/s from one client, 3,000 in 8 s while its tools/call got 429);
- a daphne killed (SIGKILL) right after its state-changing calls were answered loses none of
  their rows: each was in the database before its answer. Before: 0 of 100. A session whose row
  was lost gets it when next used (before: never); a session opened and deleted without a call
  leaves no row (before: a closed row each, kept 7 days);
- every stop of a background job is a row saying who stopped it and how, in both eras. Before:
  only tasks/cancel's own row (notifications/cancelled, DELETE, a 2026-07-28 client closing its
  call and the admin's cancel left none).
"""
import json
import os
import time

import pytest

from mcp_transport.testing import HttpClient, ModernClient

from .rows import job_once
from .test_admin import Admin
from .test_auth import new_token
from .test_toolsets import shell
from .waiting import eventually

TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
LONG = {"name": "slow_job", "arguments": {"steps": 600, "interval_ms": 100}, "_meta": {"progressToken": "p"}}
JOBS = "/admin/mcp_transport/mcpjob/"

ROWS = """
import json
from mcp_transport.models import McpCall
rows = McpCall.objects.filter(**{lookup!r}).order_by("id")
print(json.dumps([{{"method": r.method, "job_id": r.job_id, "principal": r.principal, "session_id": r.session_id,
                   "request_id": r.request_id, "address": r.client_address, "status": r.status,
                   "changes_state": r.changes_state, "target": r.target}} for r in rows]))
"""


@pytest.fixture(scope="module", autouse=True)
def _worker(celery_worker):
    return celery_worker


@pytest.fixture(scope="module")
def audited(start_server):
    return start_server(MCP_AUTH="on")


@pytest.fixture(scope="module")
def caller(server_env):
    """(token, principal key) of an ordinary account."""
    name = f"trail{os.getpid()}"
    token = new_token(server_env, name)
    code = f"from django.contrib.auth.models import User\nprint(User.objects.get(username={name!r}).pk)"
    return token, f"user:{shell(server_env, code).split()[-1]}"


def rows(server_env, **lookup) -> list:
    return json.loads(shell(server_env, ROWS.format(lookup=lookup)).strip().splitlines()[-1])


def session_rows(server_env, ids) -> dict:
    code = ("import json\nfrom mcp_transport.models import McpSession\n"
            f"print(json.dumps(dict(McpSession.objects.filter(pk__in={ids!r}).values_list('pk', 'state'))))")
    return json.loads(shell(server_env, code).strip().splitlines()[-1])


def result(reply) -> dict:
    assert reply.status == 200 and "result" in reply.json, (reply.status, reply.body)
    return reply.json["result"]


def modern(server, token, capabilities=None) -> ModernClient:
    client = ModernClient(server.url, capabilities)
    client.token = token
    return client


def legacy(server, token, capabilities=None) -> HttpClient:
    client = HttpClient(server.url, token=token)
    client.initialize(capabilities=capabilities)
    return client


def ended_task(client, era) -> str:
    """A task of ``slow_compute`` (0 s) that has completed: its taskId."""
    if era == "2026-07-28":
        task = result(client.post("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}}))["taskId"]
        eventually(lambda: _assert(result(client.post("tasks/get", {"taskId": task}))["status"] == "completed"))
        return task
    created = client.call("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}, "task": {}})
    task = created["result"]["task"]["taskId"]
    eventually(lambda: _assert(client.call("tasks/get", {"taskId": task})["result"]["status"] == "completed"))
    return task


def _assert(condition):
    assert condition


def stop_rows(server_env, job_id) -> list:
    """The state-changing rows naming the job but its tools/call's own."""
    return [row for row in rows(server_env, job_id=job_id, changes_state=True) if row["method"] != "tools/call"]


# -- item 6: only real changes are audited ----------------------------------------------------

def test_a_cancel_or_update_that_changes_nothing_is_no_audit_row_one_that_stops_a_task_is(audited, server_env,
                                                                                          caller):
    token, principal = caller
    tag = f"noop-{time.monotonic_ns()}"
    new, old = modern(audited, token, TASKS), legacy(audited, token, {"tasks": {}})
    ended = {"2026-07-28": ended_task(new, "2026-07-28"), "2025-11-25": ended_task(old, "2025-11-25")}
    for index in range(10):
        result(new.post("tasks/cancel", {"taskId": ended["2026-07-28"]}, request_id=f"{tag}-c{index}"))
        result(new.post("tasks/update", {"taskId": ended["2026-07-28"],
                                         "inputResponses": {"x": {"action": "accept"}}}, request_id=f"{tag}-u{index}"))
        refused = old.call("tasks/cancel", {"taskId": ended["2025-11-25"]})
        assert refused["error"]["code"] == -32602, refused  # "MUST reject ... already in a terminal status"
    running = result(new.post("tools/call", {"name": "slow_compute", "arguments": {"seconds": 60}}))["taskId"]
    result(new.post("tasks/cancel", {"taskId": running}, request_id=f"{tag}-stop"))
    # The no-ops are the caller's sampled calls now: once the marker's row (queued after them) is
    # written, theirs are too, whatever they say.
    result(new.post("tools/call", {"name": "echo", "arguments": {"text": "m"}}, request_id=f"{tag}-marker"))
    eventually(lambda: _assert(rows(server_env, request_id=f"{tag}-marker")))
    noops = rows(server_env, request_id__startswith=f"{tag}-c") + rows(server_env, request_id__startswith=f"{tag}-u")
    print("no-op cancels and updates of an ended task:", len(noops), "rows,",
          sum(row["changes_state"] for row in noops), "state-changing")
    assert noops and not any(row["changes_state"] for row in noops)
    for task in ended.values():
        assert stop_rows(server_env, task) == []
    (stop,) = stop_rows(server_env, running)  # written before its answer: there at once
    assert (stop["method"], stop["principal"], stop["request_id"]) == ("tasks/cancel", principal, f"{tag}-stop")


# -- item 11: durable before the answer; session rows on first use --------------------------------

def test_a_killed_daphne_loses_no_audit_row_and_its_sessions_get_their_rows_when_next_used(start_server,
                                                                                           server_env, caller):
    token, principal = caller
    tag, count = f"kill-{time.monotonic_ns()}", 20
    doomed = start_server(MCP_AUTH="on")
    clients = []
    for index in range(count):
        client = legacy(doomed, token)
        reply = client.call("tools/call", {"name": "greet", "arguments": {"name": f"s{index}"}})  # not read-only
        assert reply["result"]["content"][0]["text"] == f"Hello, s{index}!", reply
        result(modern(doomed, token).post("tools/call", {"name": "greet", "arguments": {"name": "m"}},
                                          request_id=f"{tag}-{index}"))
        clients.append(client)
    doomed.kill()  # SIGKILL right after the last answer
    ids = [client.session_id for client in clients]
    legacy_rows = [row for row in rows(server_env, session_id__in=ids, method="tools/call")]
    modern_rows = rows(server_env, request_id__startswith=f"{tag}-")
    written = session_rows(server_env, ids)
    print(f"after SIGKILL: {len(legacy_rows)} + {len(modern_rows)} of {count} + {count} audit rows, "
          f"{len(written)} of {count} session rows")
    assert len(legacy_rows) == count and len(modern_rows) == count
    assert all(row["changes_state"] and row["principal"] == principal for row in legacy_rows + modern_rows)
    # Whatever the killed process wrote of the sessions' rows, as if it had written none of them:
    shell(server_env, "from mcp_transport.models import McpSession\n"
                      f"McpSession.objects.filter(pk__in={ids!r}).delete()")
    revived = start_server(MCP_AUTH="on")
    for client in clients:  # the sessions live on in Redis: their next request
        assert client.on(revived.url).call("ping")["result"] == {}
    eventually(lambda: _assert(len(session_rows(server_env, ids)) == count), deadline=30)
    # Sessions opened and deleted without a call leave no row; a marker that did something does.
    churn = []
    for _ in range(10):
        client = legacy(revived, token)
        assert client.delete().status == 200
        churn.append(client.session_id)
    marker = legacy(revived, token)
    assert marker.call("ping")["result"] == {}
    assert marker.delete().status == 200
    # One writer per process, in order: once the marker's row is closed, the churn's writes are done.
    eventually(lambda: _assert(session_rows(server_env, [marker.session_id]) == {marker.session_id: "closed"}))
    assert session_rows(server_env, churn) == {}


# -- item 14a: every job stop, who and how, both eras ------------------------------------------

def started(client, request_id=None):
    """A long background call of ``client``'s session, running (its first progress seen)."""
    message = client.message("tools/call", LONG, request_id=request_id)
    stream = client.stream("POST", message)
    assert stream.next_message(timeout=30)["method"] == "notifications/progress"
    return stream, message["id"]


def job_of(server_env, **lookup) -> str:
    code = ("from mcp_transport.models import McpJob\n"
            f"print(McpJob.objects.filter(**{lookup!r}).order_by('-created_at')[0].id)")
    return eventually(lambda: shell(server_env, code).split()[-1])


def the_stop(server_env, job_id) -> dict:
    job_once(server_env, ("cancelled",), id=job_id)
    (row,) = eventually(lambda: _one(stop_rows(server_env, job_id)))
    return row


def _one(found):
    assert len(found) == 1, found
    return found


def test_every_job_stop_is_recorded_with_who_and_how_in_both_eras(audited, server_env, caller, admin_login):
    token, principal = caller
    stops = {}
    # 2025-11-25: notifications/cancelled
    client = legacy(audited, token)
    stream, request_id = started(client)
    job = job_of(server_env, session_id=client.session_id)
    notified = client.request("POST", client.message("notifications/cancelled", {"requestId": request_id},
                                                     request_id=False))
    assert notified.status == 202
    stops["notifications/cancelled"] = the_stop(server_env, job)
    stream.close()
    assert stops["notifications/cancelled"]["session_id"] == client.session_id
    # 2025-11-25: DELETE of the session
    client = legacy(audited, token)
    stream, _ = started(client)
    job = job_of(server_env, session_id=client.session_id)
    assert client.delete().status == 200
    stops["session deleted"] = the_stop(server_env, job)
    stream.close()
    # 2025-11-25: tasks/cancel (its own row is the stop's)
    client = legacy(audited, token, {"tasks": {}})
    task = client.call("tools/call", {**LONG, "task": {}})["result"]["task"]["taskId"]
    assert client.call("tasks/cancel", {"taskId": task})["result"]["status"] == "cancelled"
    stops["tasks/cancel (2025-11-25)"] = the_stop(server_env, task)
    # 2026-07-28: the client closes its call's response (disconnect = cancel)
    request_id = f"gone-{time.monotonic_ns()}"
    stream = modern(audited, token).open("tools/call", LONG, request_id=request_id)
    assert stream.next_message(timeout=30)["method"] == "notifications/progress"
    job = job_of(server_env, request_id=request_id)
    stream.close()
    stops["disconnect"] = the_stop(server_env, job)
    # 2026-07-28: tasks/cancel
    tasks = modern(audited, token, TASKS)
    task = result(tasks.post("tools/call", {"name": "slow_compute", "arguments": {"seconds": 60}}))["taskId"]
    result(tasks.post("tasks/cancel", {"taskId": task}))
    stops["tasks/cancel (2026-07-28)"] = the_stop(server_env, task)
    # The admin: its cancel action, and its terminate of a session whose job runs
    admin = Admin(audited, admin_login)
    admin_key = "user:" + shell(server_env, "from django.contrib.auth.models import User\n"
                                            f"print(User.objects.get(username={admin_login[0]!r}).pk)").split()[-1]
    client = legacy(audited, token)
    stream, _ = started(client)
    job = job_of(server_env, session_id=client.session_id)
    html = admin.post(JOBS, {"action": "cancel_jobs", "index": 0, "select_across": 0, "_selected_action": [job]})
    assert "Cancelled 1 job(s)" in html
    stops["admin: cancel"] = the_stop(server_env, job)
    stream.close()
    client = legacy(audited, token)
    stream, _ = started(client)
    job = job_of(server_env, session_id=client.session_id)
    eventually(lambda: _assert(session_rows(server_env, [client.session_id])))  # listed: it did something
    html = admin.action("terminate_sessions", [client.session_id])
    assert "Terminated 1 session" in html
    stops["session terminated"] = the_stop(server_env, job)
    stream.close()
    print({how: (row["method"], row["principal"], row["address"]) for how, row in stops.items()})
    for how, row in stops.items():
        assert row["method"] == how.split(" (")[0] and row["changes_state"], row
        assert row["target"] == "slow_job" or how.startswith("tasks/cancel"), row  # the tool it stopped
        assert row["principal"] == (admin_key if how.startswith(("admin", "session terminated")) else principal), row
    assert stops["disconnect"]["address"] == stops["session deleted"]["address"] == "127.0.0.1"
