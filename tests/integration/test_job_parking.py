"""Background tools of both eras give their Celery slot back while they wait for their client.

An async tool (``multi_input``: two elicitations at once, ``asyncio.gather``) parks as a sync
tool does: both questions go out, the run ends, and each answer queues the job again; its re-run
finds the questions by their index in the call, so none is sent twice, and answers arriving in
any order reach the right question. A 2026-07-28 job (a task of the tasks extension, or a plain
call answered by the multi-round-trip retry) parks the same way: its inputRequests stay, the job
is ``input_required`` with no slot, and the answer (tasks/update or the retry, on either web
process) queues it again.

Before, four such jobs pinned both slots of a two-process worker until CLIENT_REQUEST_TIMEOUT
(300 s here) and every other user's job waited behind them. The deadlines are far under that
stall and far over a loaded machine's latency.
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcp_transport.testing import HttpClient, LiveWorker, ModernClient

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 60.0
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}}
ASKS = {"elicitation": {}}
#: Long enough that a job waiting in its slot would outlast every deadline of this module.
SLOW_ANSWERS = {"CLIENT_REQUEST_TIMEOUT": 300, "JOB_HELD_ASK_TIMEOUT": 300}


@pytest.fixture(scope="module")
def servers(start_server, server_env):
    """Two web processes and a worker of two pool processes, on a queue of their own."""
    queue = f"{server_env['CELERY_QUEUE']}-park"
    settings = json.dumps(SLOW_ANSWERS)
    first = start_server(CELERY_QUEUE=queue, MCP_TRANSPORT_JSON=settings)
    second = start_server(CELERY_QUEUE=queue, MCP_TRANSPORT_JSON=settings)
    worker = LiveWorker(queue=queue, cwd=ROOT, concurrency=2,
                        env={**server_env, "CELERY_QUEUE": queue, "LOG_LEVEL": "INFO",
                             "MCP_TRANSPORT_JSON": json.dumps({**SLOW_ANSWERS, "HEARTBEAT_SECONDS": 0.3})}).start()
    yield first, second
    worker.stop()


def until(condition, timeout=DEADLINE, every=0.05):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(every)
    return value


def result(reply):
    assert reply.status == 200, (reply.status, reply.body)
    assert "error" not in reply.json, reply.json
    return reply.json["result"]


def named(name):
    return {"action": "accept", "content": {"name": name}}


class TwoQuestions:
    """A 2025-11-25 session calling multi_input on an SSE stream it keeps reading."""

    def __init__(self, server):
        self.client = HttpClient(server.url)
        self.client.initialize(capabilities=ASKS)
        self.call = self.client.message("tools/call", {"name": "multi_input", "arguments": {}})
        self.stream = self.client.stream("POST", self.call, timeout=DEADLINE)
        self.questions = {}  # message -> the elicitation request
        self.asked = []

    def read(self):
        """The next message of the call's stream."""
        event = self.stream.next_event(timeout=DEADLINE)
        assert event is not None, self.stream.raw
        message = json.loads(event.data) if event.data else {}
        if message.get("method") == "elicitation/create":
            self.asked.append(message["params"]["message"])
            self.questions[message["params"]["message"]] = message
        return message

    def both_asked(self):
        while len(self.questions) < 2:
            self.read()
        return self

    def answer(self, question, name):
        reply = {"jsonrpc": "2.0", "id": self.questions[question]["id"], "result": named(name)}
        assert self.client.request("POST", reply).status == 202

    def outcome(self):
        while True:
            message = self.read()
            if message.get("id") == self.call["id"] and "method" not in message:
                self.stream.close()
                return message["result"]


def ask_as_task(client):
    """A modern task of confirm_delete that waits for its answer: (task id, inputRequests key)."""
    created = result(client.post("tools/call", {"name": "confirm_delete", "arguments": {"filename": "t.txt"}}))
    task = until(lambda: (t := result(client.post("tasks/get", {"taskId": created["taskId"]})))["status"]
                 == "input_required" and t)
    (key, question), = task["inputRequests"].items()
    assert question["params"]["message"] == "Delete t.txt?"
    return created["taskId"], key


def other_users_job_finishes(server):
    other = HttpClient(server.url)
    other.initialize()
    reply = other.call("tools/call", {"name": "slow_job", "arguments": {"steps": 1, "interval_ms": 1}})
    assert reply["result"]["content"][0]["text"] == "done 1", reply


def answer_by_retry(client, params, asked, names):
    """Retry the plain 2026-07-28 call with the answers it asks for, round after round."""
    while asked["resultType"] == "input_required":
        assert set(asked["inputRequests"]) <= set(names), asked
        answers = {key: named(names[key]) for key in asked["inputRequests"]}
        asked = result(client.post("tools/call", {**params, "requestState": asked["requestState"],
                                                  "inputResponses": answers}, timeout=DEADLINE))
    return asked


def finished(client, task_id):
    return until(lambda: (t := result(client.post("tasks/get", {"taskId": task_id})))["status"]
                 not in ("working", "input_required") and t)


def test_other_users_jobs_start_while_jobs_of_both_eras_wait_for_answers(servers):
    first, second = servers
    legacy = [TwoQuestions(first).both_asked(), TwoQuestions(second).both_asked()]
    task_id, key = ask_as_task(ModernClient(first.url, TASKS))
    plain, params = ModernClient(first.url, ASKS), {"name": "multi_input", "arguments": {}}
    asked = result(plain.post("tools/call", params))
    assert asked["resultType"] == "input_required", asked

    other_users_job_finishes(first)  # four jobs wait for answers, the worker has two slots: it still runs

    # Each is answered (on the other web process for the 2026-07-28 ones) and ends with its answers.
    legacy[0].answer("First name?", "Ada")
    legacy[0].answer("Second name?", "Bob")
    legacy[1].answer("Second name?", "Eve")  # in reverse order
    legacy[1].answer("First name?", "Fay")
    assert legacy[0].outcome()["content"][0]["text"] == "Ada and Bob"
    assert legacy[1].outcome()["content"][0]["text"] == "Fay and Eve"
    later = ModernClient(second.url, TASKS)
    result(later.post("tasks/update", {"taskId": task_id,
                                       "inputResponses": {key: {"action": "accept", "content": {"confirm": True}}}}))
    task = finished(later, task_id)
    assert task["status"] == "completed" and task["result"]["content"][0]["text"] == "Deleted t.txt", task
    done = answer_by_retry(ModernClient(second.url, ASKS), params, asked, {"elicit-1": "Cy", "elicit-2": "Di"})
    assert done["content"][0]["text"] == "Cy and Di", done


def test_two_concurrent_questions_answered_in_reverse_order(servers):
    """Both slots would be taken by these two jobs if they waited in them."""
    first, second = servers
    sessions = [TwoQuestions(first).both_asked(), TwoQuestions(second).both_asked()]
    other_users_job_finishes(first)
    for session, (one, two) in zip(sessions, [("Yan", "Zed"), ("Uma", "Vic")]):
        session.answer("Second name?", two)
        session.answer("First name?", one)
        assert session.outcome()["content"][0]["text"] == f"{one} and {two}"
        assert sorted(session.asked) == ["First name?", "Second name?"]  # each asked once, over every run


def test_parked_modern_jobs_are_answered_on_the_other_process(servers):
    """A task answered through tasks/update, a plain call through its retry (MRTR), both after
    parking: meanwhile another user's job runs on the worker's two slots."""
    first, second = servers
    task_id, key = ask_as_task(ModernClient(first.url, TASKS))
    params = {"name": "confirm_delete", "arguments": {"filename": "p.txt"}}
    asked = result(ModernClient(first.url, ASKS).post("tools/call", params))
    (question_key, question), = asked["inputRequests"].items()
    assert question_key == "elicit-1" and question["params"]["message"] == "Delete p.txt?"
    other_users_job_finishes(first)

    later = ModernClient(second.url, TASKS)
    result(later.post("tasks/update", {"taskId": task_id,
                                       "inputResponses": {key: {"action": "accept", "content": {"confirm": False}}}}))
    task = finished(later, task_id)
    assert task["status"] == "completed" and task["result"]["content"][0]["text"] == "Kept t.txt", task
    done = result(ModernClient(second.url, ASKS).post(
        "tools/call", {**params, "requestState": asked["requestState"],
                       "inputResponses": {question_key: {"action": "accept", "content": {"confirm": True}}}},
        timeout=DEADLINE))
    assert done["content"][0]["text"] == "Deleted p.txt", done


def test_cancelling_a_parked_task_ends_it(servers):
    first, _second = servers
    client = ModernClient(first.url, TASKS)
    task_id, _key = ask_as_task(client)
    result(client.post("tasks/cancel", {"taskId": task_id}))
    task = result(client.post("tasks/get", {"taskId": task_id}))
    assert task["status"] == "cancelled" and "inputRequests" not in task, task


def job_statuses(server_env, session_id) -> list:
    code = ("from mcp_transport.models import McpJob; "
            f"print(list(McpJob.objects.filter(session_id={session_id!r}).values_list('status', flat=True)))")
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, **server_env}, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1].replace("'", '"'))


def test_delete_ends_a_parked_async_job(servers, server_env):
    first, _second = servers
    session = TwoQuestions(first).both_asked()
    session.stream.close()
    session_id = session.client.session_id
    until(lambda: job_statuses(server_env, session_id) == ["input_required"], every=0.5)
    assert session.client.delete().status == 200
    assert job_statuses(server_env, session_id) == ["cancelled"]


@pytest.fixture(scope="module")
def holding_server(start_server, server_env):
    """A worker of two slots whose tools do not park (JOB_PARK_ON_ASK off): they wait in their
    slot, at most one of the two (JOB_HELD_WAITS' default) and for 45 s at most. Every test client
    is one caller (127.0.0.1): its share of the worker is both slots here, so that its second job
    runs (MAX_RUNNING_JOBS_PER_CALLER's default would keep it queued behind the first)."""
    queue = f"{server_env['CELERY_QUEUE']}-held"
    settings = {"CLIENT_REQUEST_TIMEOUT": 600, "JOB_PARK_ON_ASK": False, "JOB_HELD_ASK_TIMEOUT": 45}
    server = start_server(CELERY_QUEUE=queue, MCP_TRANSPORT_JSON=json.dumps(settings))
    worker_settings = {**settings, "HEARTBEAT_SECONDS": 0.3, "MAX_RUNNING_JOBS_PER_CALLER": 2}
    worker = LiveWorker(queue=queue, cwd=ROOT, concurrency=2,
                        env={**server_env, "CELERY_QUEUE": queue, "LOG_LEVEL": "INFO",
                             "MCP_TRANSPORT_JSON": json.dumps(worker_settings)}).start()
    yield server
    worker.stop()


def confirm(server):
    """A session calling confirm_job: (client, its stream, the call, the elicitation or the result)."""
    client = HttpClient(server.url)
    client.initialize(capabilities=ASKS)
    call = client.message("tools/call", {"name": "confirm_job", "arguments": {"question": "Ship it?"}})
    stream = client.stream("POST", call, timeout=DEADLINE + 45)
    while True:
        event = stream.next_event(timeout=DEADLINE + 45)
        assert event is not None, stream.raw
        message = json.loads(event.data) if event.data else {}
        if message.get("method") == "elicitation/create" or message.get("id") == call["id"]:
            return client, stream, call, message


def test_jobs_that_wait_in_their_slot_leave_one_free_and_wait_less_long(holding_server):
    client, stream, call, asked = confirm(holding_server)
    assert asked.get("method") == "elicitation/create"

    # The second slot may not wait for a client too: the ask fails at once, and other jobs run.
    _client, refused_stream, _call, refused = confirm(holding_server)
    refused_stream.close()
    text = refused["result"]["content"][0]["text"]
    assert refused["result"]["isError"] is True and "too many of this worker's slots wait" in text, refused
    other_users_job_finishes(holding_server)

    answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"confirm": True}}}
    assert client.request("POST", answer).status == 202
    while (message := json.loads(stream.next_event(timeout=DEADLINE).data or "{}")).get("id") != call["id"]:
        pass
    assert message["result"]["content"][0]["text"] == "confirmed"
    stream.close()

    # Unanswered, such a wait ends after JOB_HELD_ASK_TIMEOUT (45 s), not CLIENT_REQUEST_TIMEOUT (600 s).
    _client, stream, call, asked = confirm(holding_server)
    while (message := json.loads(stream.next_event(timeout=DEADLINE + 45).data or "{}")).get("id") != call["id"]:
        pass
    assert "no answer in time" in message["result"]["content"][0]["text"], message
    stream.close()


def test_a_task_asking_two_questions_at_once_sends_both_on_tasks_result(servers):
    """A 2025-11-25 task of multi_input, followed by tasks/result on the other web process: both
    open questions go out there (a task kept only its last one), and their answers finish it."""
    first, second = servers
    client = HttpClient(first.url)
    client.initialize(capabilities=ASKS)
    task = client.call("tools/call", {"name": "multi_input", "arguments": {}, "task": {}})["result"]["task"]
    until(lambda: client.call("tasks/get", {"taskId": task["taskId"]})["result"]["status"] == "input_required")
    follower = client.on(second.url)
    call = follower.message("tasks/result", {"taskId": task["taskId"]})
    stream = follower.stream("POST", call, timeout=DEADLINE)
    questions = {}
    while len(questions) < 2:
        event = stream.next_event(timeout=DEADLINE)
        assert event is not None, (questions, stream.raw)
        message = json.loads(event.data) if event.data else {}
        if message.get("method") == "elicitation/create":
            questions[message["params"]["message"]] = message["id"]
    for question, name in (("Second name?", "Kim"), ("First name?", "Lou")):
        reply = {"jsonrpc": "2.0", "id": questions[question], "result": named(name)}
        assert client.request("POST", reply).status == 202
    while (event := stream.next_event(timeout=DEADLINE)) is not None:
        message = json.loads(event.data) if event.data else {}
        if message.get("id") == call["id"]:
            assert message["result"]["content"][0]["text"] == "Lou and Kim", message
            break
    else:
        raise AssertionError(stream.raw)
    stream.close()
