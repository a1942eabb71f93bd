"""The 2026-07-28 era's long calls on real daphne processes, Redis and a Celery worker: the tasks
extension (io.modelcontextprotocol/tasks), multi-round-trip requests (SEP-2322) inline and in a
worker, and disconnect = cancel."""
import http.client
import json
import time

import pytest
from django.core.cache import cache
from mcp import Client, types

from mcp_transport.testing import ModernClient
from tools.bounds import counter_key

from .rows import job_once

TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
ASKS = {"elicitation": {}, "sampling": {}, "roots": {}}


@pytest.fixture(autouse=True)
def _worker(celery_worker):
    return celery_worker


def result(reply, request_id=None):
    assert reply.status == 200, (reply.status, reply.body)
    body = reply.json
    assert "error" not in body, body
    return body["result"]


def error(reply, code=-32602):
    body = reply.json
    assert "error" in body, body
    assert body["error"]["code"] == code, body
    return body["error"]


def poll(client, task_id, until=("completed", "failed", "cancelled"), timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        task = result(client.post("tasks/get", {"taskId": task_id}))
        if task["status"] in until or time.monotonic() > deadline:
            return task
        time.sleep(0.05)


def until(condition, timeout=30, every=0.05):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(every)
    return value


# -- the tasks extension --------------------------------------------------------------------------

def test_a_task_outlives_the_web_process_that_accepted_it_and_is_polled_on_another(start_server, second_server):
    doomed = start_server()
    created = result(ModernClient(doomed.url, TASKS).post("tools/call", {"name": "slow_compute",
                                                                          "arguments": {"seconds": 1, "label": "k"}}))
    assert created["resultType"] == "task" and created["status"] == "working"
    assert isinstance(created["ttlMs"], int) and isinstance(created["pollIntervalMs"], int)
    doomed.kill()  # SIGKILL: the job lives on in the worker, its row in the database
    task = poll(ModernClient(second_server.url, TASKS), created["taskId"])
    assert task["status"] == "completed", task
    assert task["result"]["content"][0]["text"] == "computed k in 1.0 s"
    assert task["result"]["resultType"] == "complete"  # the inlined CallToolResult of this era
    assert "requestState" not in task and "io.modelcontextprotocol/related-task" not in task["result"].get("_meta", {})


def test_a_task_question_is_answered_by_tasks_update_on_another_process(mcp_server, second_server):
    first, second = ModernClient(mcp_server.url, {**TASKS, **ASKS}), ModernClient(second_server.url, {**TASKS, **ASKS})
    created = result(first.post("tools/call", {"name": "confirm_delete", "arguments": {"filename": "a.txt"}}))
    asking = poll(second, created["taskId"], until=("input_required",))
    (key, question), = asking["inputRequests"].items()
    assert question["method"] == "elicitation/create" and question["params"]["message"] == "Delete a.txt?"
    ack = result(first.post("tasks/update", {"taskId": created["taskId"],
                                             "inputResponses": {key: {"action": "accept", "content": {"confirm": True}}}}))
    assert ack["resultType"] == "complete" and "status" not in ack
    task = poll(second, created["taskId"])
    assert task["status"] == "completed" and task["result"]["content"][0]["text"] == "Deleted a.txt"


def test_tasks_need_the_extension_and_are_not_found_once_unknown(mcp_server):
    plain = ModernClient(mcp_server.url)
    required = error(plain.post("tools/call", {"name": "failing_job", "arguments": {}}), code=-32021)
    assert required["data"] == {"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
    error(plain.post("tasks/get", {"taskId": "x"}), code=-32021)
    error(ModernClient(mcp_server.url, TASKS).post("tasks/get", {"taskId": "no-such-task"}), code=-32602)


def test_a_cancelled_task_stops_its_worker(mcp_server):
    client = ModernClient(mcp_server.url, TASKS)
    created = result(client.post("tools/call", {"name": "slow_compute", "arguments": {"seconds": 60}}))
    poll(client, created["taskId"], until=("working",))
    ack = result(client.post("tasks/cancel", {"taskId": created["taskId"]}))
    assert ack["resultType"] == "complete" and "status" not in ack
    task = poll(client, created["taskId"])
    assert task["status"] == "cancelled"
    again = result(client.post("tasks/cancel", {"taskId": created["taskId"]}))
    assert again["resultType"] == "complete" and "status" not in again  # idempotent on an ended task


# -- multi-round trips --------------------------------------------------------------------------

def answer_name(name):
    return {"user_name": {"action": "accept", "content": {"name": name}}}


def test_a_background_tool_question_is_answered_by_a_retry_on_another_process(mcp_server, second_server):
    first, second = ModernClient(mcp_server.url, ASKS), ModernClient(second_server.url, ASKS)
    params = {"name": "confirm_delete", "arguments": {"filename": "b.txt"}}
    asked = result(first.post("tools/call", params))
    assert asked["resultType"] == "input_required" and "taskId" not in asked
    (key, question), = asked["inputRequests"].items()
    assert question["method"] == "elicitation/create"
    done = result(second.post("tools/call", {**params, "requestState": asked["requestState"],
                                             "inputResponses": {key: {"action": "accept",
                                                                      "content": {"confirm": True}}}}))
    assert done["resultType"] == "complete" and done["content"][0]["text"] == "Deleted b.txt"


def test_prompts_and_resources_ask_too(mcp_server, second_server):
    first, second = ModernClient(mcp_server.url, ASKS), ModernClient(second_server.url, ASKS)
    asked = result(first.post("resources/read", {"uri": "test://asking/intro"}))
    assert list(asked["inputRequests"]) == ["section"]
    read = result(second.post("resources/read", {"uri": "test://asking/intro", "requestState": asked["requestState"],
                                                 "inputResponses": {"section": {"action": "accept",
                                                                                "content": {"section": "B"}}}}))
    assert read["contents"][0]["text"] == "intro: section B"
    asked = result(first.post("prompts/get", {"name": "test_input_required_result_prompt"}))
    got = result(second.post("prompts/get", {"name": "test_input_required_result_prompt",
                                             "requestState": asked["requestState"],
                                             "inputResponses": {"user_context": {"action": "accept",
                                                                                 "content": {"context": "tests"}}}}))
    assert got["messages"][0]["content"]["text"] == "Use this context: tests"


def test_a_tampered_request_state_is_refused(mcp_server):
    client = ModernClient(mcp_server.url, ASKS)
    params = {"name": "test_input_required_result_elicitation", "arguments": {}}
    asked = result(client.post("tools/call", params))
    state = asked["requestState"]
    flipped = state[:-3] + ("A" if state[-3] != "A" else "B") + state[-2:]
    refused = error(client.post("tools/call", {**params, "requestState": flipped, "inputResponses": answer_name("x")}))
    assert refused["data"] == {"reason": "invalid"} and "altered" in refused["message"]


def test_a_request_state_of_another_tool_or_arguments_is_refused(mcp_server):
    client = ModernClient(mcp_server.url, ASKS)
    asked = result(client.post("tools/call", {"name": "test_input_required_result_elicitation", "arguments": {}}))
    for params in ({"name": "test_input_required_result_tampered_state", "arguments": {}},
                   {"name": "test_input_required_result_elicitation", "arguments": {"extra": 1}}):
        refused = error(client.post("tools/call", {**params, "requestState": asked["requestState"],
                                                   "inputResponses": answer_name("x")}))
        assert refused["data"] == {"reason": "foreign"}


def test_an_expired_request_state_is_refused(start_server):
    server = start_server(MCP_TRANSPORT_JSON=json.dumps({"REQUEST_STATE_TTL": 1}))
    client = ModernClient(server.url, ASKS)
    params = {"name": "test_input_required_result_elicitation", "arguments": {}}
    issued = time.time()
    asked = result(client.post("tools/call", params))
    until(lambda: time.time() > issued + 2.5)  # Django's signatures count whole seconds
    refused = error(client.post("tools/call", {**params, "requestState": asked["requestState"],
                                               "inputResponses": answer_name("x")}))
    assert refused["data"] == {"reason": "expired"}


@pytest.mark.asyncio
async def test_the_sdk_client_answers_a_background_tools_question_through_its_callback(mcp_server):
    asked = []

    async def elicit(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"confirm": True})

    async with Client(mcp_server.url, elicitation_callback=elicit) as client:  # mode="auto": 2026-07-28
        assert client.protocol_version == "2026-07-28"
        done = await client.call_tool("confirm_delete", {"filename": "c.txt"})
    assert asked == ["Delete c.txt?"]
    assert done.is_error is not True and done.content[0].text == "Deleted c.txt"


# -- disconnect = cancel -------------------------------------------------------------------------

def stops_counting(name, steps):
    """The counter ``name`` stopped below ``steps``: two reads a second apart agree, and it stays."""
    key = counter_key(name)

    def settled():
        before = cache.get(key)
        time.sleep(1)
        return before is not None and cache.get(key) == before and before
    stopped_at = until(settled, timeout=60, every=0)
    time.sleep(1)
    return cache.get(key) == stopped_at and stopped_at < steps


#: The disconnect tests' server. A background tool that sets no limits of its own gets these: a
#: job whose cancel was missed frees the run's shared one-slot worker (celery_worker) within
#: seconds, not after 1000 s of counting that failed every later job test of the run. What the
#: tests prove does not rest on the limits: the job must end *cancelled* (a limit fails it).
BOUNDED = {"JOB_SOFT_TIME_LIMIT": 20, "JOB_TIME_LIMIT": 25}


@pytest.fixture(scope="module")
def bounded_server(start_server):
    return start_server(MCP_TRANSPORT_JSON=json.dumps(BOUNDED))


@pytest.mark.parametrize("tool", ["count_inline", "tick_job"])
def test_closing_the_response_cancels_the_call(bounded_server, server_env, tool):
    key = f"count-{tool}-{time.time_ns()}"
    client = ModernClient(bounded_server.url)
    stream = client.open("tools/call", {"name": tool, "arguments": {"key": key, "steps": 100000, "interval_ms": 10},
                                        "_meta": {"progressToken": "t"}})
    assert stream.status == 200
    assert json.loads(stream.next_event(timeout=30).data)["method"] == "notifications/progress"  # it runs
    stream.close()
    assert stops_counting(key, 100000)
    if tool == "tick_job":  # cancelled by the close, not stopped by a time limit
        job = job_once(server_env, ["cancelled", "failed", "completed"], arguments__key=key)
        # (the server's log says whether the close was seen and the cancel sent, when it was not)
        assert (job["status"], job["error"]) == ("cancelled", "The client closed the request."), \
            (job, bounded_server.log()[-6000:])


def test_closing_right_after_sending_the_call_cancels_its_job(bounded_server, server_env):
    """The client leaves while its job is being created (the consumer's task starts before it
    sees the disconnect): the job, once it exists, is cancelled."""
    key = f"count-early-{time.time_ns()}"
    client = ModernClient(bounded_server.url)
    message = client.modern_message("tools/call", {"name": "tick_job", "arguments": {
        "key": key, "steps": 100000, "interval_ms": 10}, "_meta": {"progressToken": "t"}})
    connection = http.client.HTTPConnection(client.host, client.port, timeout=30)
    connection.request("POST", client.path, body=json.dumps(message).encode(),
                       headers=client.headers(client.modern_headers(message), session=False))
    connection.close()  # before any response: the server is creating the job
    job = job_once(server_env, ["cancelled", "failed", "completed"], arguments__key=key)
    # Before: the cancel cut the job's creation short, and its row stayed queued for good (or,
    # cut later, its task ran 1000 s with no one to cancel it).
    assert job is not None and (job["status"], job["error"]) == ("cancelled", "The client closed the request."), job
    assert cache.get(counter_key(key)) is None or stops_counting(key, 100000)
