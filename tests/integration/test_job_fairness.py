"""Background tools waiting for their client's answer hold no Celery slot: a sync tool's ask
ends its run (the job is parked, ``input_required``), and the answer queues it again, to run
from its start with the answers so far replayed (following.resume_parked). A session's DELETE ends
its waiting jobs at once.

Before, two jobs waiting for elicitation answers pinned both slots of a two-process worker and
every other user's job queued for CLIENT_REQUEST_TIMEOUT (300 s); deleting the session released
nothing. The deadlines below are far under that stall and far over a loaded machine's latency.
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
DEADLINE = 60.0
#: The pair's CLIENT_REQUEST_TIMEOUT: short, for the test of a question nobody answers.
ASK_TIMEOUT = 15
SCHEMA_TOOL = {"name": "confirm_job", "arguments": {"question": "Ship it?"}}


@pytest.fixture(scope="module")
def server(start_server, server_env):
    """A server and a worker of two pool processes, on a queue of their own."""
    queue = f"{server_env['CELERY_QUEUE']}-fair"
    server = start_server(CELERY_QUEUE=queue, MCP_TRANSPORT_JSON=json.dumps({"CLIENT_REQUEST_TIMEOUT": ASK_TIMEOUT}))
    worker = LiveWorker(queue=queue, cwd=ROOT, concurrency=2,
                        env={**server_env, "CELERY_QUEUE": queue, "LOG_LEVEL": "INFO", "MCP_TRANSPORT_JSON":
                             json.dumps({"HEARTBEAT_SECONDS": 0.3, "CLIENT_REQUEST_TIMEOUT": ASK_TIMEOUT})}).start()
    yield server
    worker.stop()


def ask_and_wait(server):
    """A session whose confirm_job has sent its elicitation: (client, open stream, request)."""
    client = HttpClient(server.url)
    client.initialize(capabilities={"elicitation": {}})
    message = client.message("tools/call", SCHEMA_TOOL)
    stream = client.stream("POST", message, timeout=DEADLINE)
    while True:
        event = stream.next_event(timeout=DEADLINE)
        assert event is not None, stream.raw
        asked = json.loads(event.data) if event.data else {}
        if asked.get("method") == "elicitation/create":
            return client, stream, message, asked


def job_statuses(server_env, session_id) -> list:
    code = ("from mcp_transport.models import McpJob; "
            f"print(list(McpJob.objects.filter(session_id={session_id!r}).values_list('status', flat=True)))")
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, **server_env}, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1].replace("'", '"'))


def test_other_users_jobs_start_while_two_jobs_wait_for_answers_and_an_answer_resumes(server):
    first, first_stream, first_call, first_ask = ask_and_wait(server)
    second, second_stream, _call, _ask = ask_and_wait(server)

    other = HttpClient(server.url)
    other.initialize()
    started = time.monotonic()
    reply = other.call("tools/call", {"name": "slow_job", "arguments": {"steps": 1, "interval_ms": 1}})
    assert reply["result"]["content"][0]["text"] == "done 1", reply
    assert time.monotonic() - started < DEADLINE

    # The first user answers: the job runs again with the answer and its response arrives on the
    # stream the client kept open.
    answer = {"jsonrpc": "2.0", "id": first_ask["id"], "result": {"action": "accept", "content": {"confirm": True}}}
    assert first.request("POST", answer).status == 202
    while (event := first_stream.next_event(timeout=DEADLINE)) is not None:
        message = json.loads(event.data) if event.data else {}
        if message.get("id") == first_call["id"] and "result" in message:
            assert message["result"]["content"][0]["text"] == "confirmed"
            break
        assert message.get("method") != "elicitation/create", "asked again"
    else:
        raise AssertionError(first_stream.raw)
    first_stream.close()
    second_stream.close()


def test_delete_ends_a_job_waiting_for_its_client(server, server_env):
    client, stream, _call, _ask = ask_and_wait(server)
    stream.close()
    # Parked once the run has ended (its question goes out first).
    deadline = time.monotonic() + DEADLINE
    while job_statuses(server_env, client.session_id) != ["input_required"]:
        assert time.monotonic() < deadline, job_statuses(server_env, client.session_id)
        time.sleep(0.5)
    assert client.delete().status == 200
    assert job_statuses(server_env, client.session_id) == ["cancelled"]


def test_a_question_nobody_answers_times_out_and_the_tool_goes_on(server):
    """The parked job's question expires after CLIENT_REQUEST_TIMEOUT (noticed by the web process
    following the stream): the client is told to stop, and the tool gets ClientRequestError."""
    client, stream, call, asked = ask_and_wait(server)
    seen = []
    while (event := stream.next_event(timeout=DEADLINE)) is not None:
        message = json.loads(event.data) if event.data else {}
        seen.append(message)
        if message.get("id") == call["id"] and "method" not in message:
            break
    cancels = [m for m in seen if m.get("method") == "notifications/cancelled"]
    assert [m["params"]["requestId"] for m in cancels] == [asked["id"]], seen
    result = seen[-1]["result"]
    assert result["isError"] is True and "no answer in time" in result["content"][0]["text"], result
    stream.close()


def test_a_parked_modern_question_nobody_answers_times_out(server):
    """A 2026-07-28 task's question expires the same way (noticed by tasks/get): it leaves
    inputRequests and the tool goes on with ClientRequestError."""
    client = ModernClient(server.url, {"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}})
    created = client.post("tools/call", {"name": "confirm_delete", "arguments": {"filename": "x.txt"}}).json["result"]
    deadline = time.monotonic() + DEADLINE + ASK_TIMEOUT
    while (task := _result(client.post("tasks/get", {"taskId": created["taskId"]}).json))["status"] in (
            "working", "input_required"):
        assert time.monotonic() < deadline, task
        time.sleep(0.2)
    assert "no answer in time" in task["result"]["content"][0]["text"], task
    assert task["result"]["isError"] is True and "inputRequests" not in task


def _result(reply):
    assert "result" in reply, reply  # an error reply names itself (a KeyError said nothing)
    return reply["result"]


def test_the_cleanup_expires_a_parked_call_nobody_follows(server, server_env):
    """A plain 2026-07-28 call whose client never retries has nobody following its stream: the
    cleanup task expires its question, and the job ends with the tool's answer to that."""
    filename = f"{secrets.token_hex(6)}.txt"
    asked = ModernClient(server.url, {"elicitation": {}}).post(
        "tools/call", {"name": "confirm_delete", "arguments": {"filename": filename}}).json["result"]
    assert asked["resultType"] == "input_required", asked
    code = ("import asyncio, json; from mcp_transport.operations import cleanup; "
            "from mcp_transport.models import McpJob; asyncio.run(cleanup()); "
            f"job = McpJob.objects.get(arguments__filename={filename!r}); print(json.dumps([job.status, job.result]))")
    env = {**os.environ, **server_env, "CELERY_QUEUE": f"{server_env['CELERY_QUEUE']}-fair",
           "MCP_TRANSPORT_JSON": json.dumps({"CLIENT_REQUEST_TIMEOUT": ASK_TIMEOUT})}
    deadline = time.monotonic() + DEADLINE + ASK_TIMEOUT
    while True:
        done = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, capture_output=True,
                              text=True, env=env, check=True)
        status, result = json.loads(done.stdout.strip().splitlines()[-1])
        if status not in ("queued", "working", "input_required"):
            break
        assert time.monotonic() < deadline, (status, done.stderr)
        time.sleep(1)
    assert "no answer in time" in result["content"][0]["text"], result
