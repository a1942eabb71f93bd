"""MCP tasks (spec 2025-11-25 basic/utilities/tasks): task-augmented tools/call of background tools,
run by a real Celery worker, polled and fetched over raw HTTP on two web processes.

Raw HTTP, not the official SDK client: `mcp` 2.3.0 has the task types but validates every
tools/call result as a CallToolResult, so it rejects the CreateTaskResult of a task-augmented call."""
import json
import time

import pytest

from mcp_transport.testing import HttpClient


@pytest.fixture(autouse=True)
def _worker(celery_worker):
    return celery_worker


def _create(client, name, arguments, ttl=None, **params):
    task = {} if ttl is None else {"ttl": ttl}
    reply = client.call("tools/call", {"name": name, "arguments": arguments, "task": task, **params})
    assert "result" in reply, reply
    return reply["result"]["task"]


def _poll(client, task_id, until=("completed", "failed", "cancelled"), timeout=120):
    """The task once its status is one of ``until``. The deadline is a failsafe, not a margin: the
    run's worker is shared with other tests, whose jobs may hold its slots for a while."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        task = client.call("tasks/get", {"taskId": task_id})["result"]
        if task["status"] in until:
            return task
        time.sleep(0.05)
    raise AssertionError(f"task {task_id} still {task['status']}")


def test_capability_and_tool_level_task_support_are_declared(session):
    capabilities = session.initialize().json["result"]["capabilities"]
    assert capabilities["tasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    tools = {t["name"]: t for t in session.call("tools/list")["result"]["tools"]}
    assert tools["slow_job"]["execution"] == {"taskSupport": "optional"}
    assert tools["report_job"]["execution"] == {"taskSupport": "required"}
    assert "execution" not in tools["echo"]


def test_task_augmented_call_end_to_end_across_processes(mcp_server, second_server):
    client = HttpClient(mcp_server.url)
    client.initialize()
    task = _create(client, "slow_job", {"steps": 3, "interval_ms": 20}, ttl=60000)
    assert task["status"] == "working" and task["ttl"] == 60000
    assert {"taskId", "createdAt", "lastUpdatedAt", "pollInterval"} <= set(task)
    other = client.on(second_server.url)
    done = _poll(other, task["taskId"])
    assert done["status"] == "completed"
    listed = other.call("tasks/list")["result"]["tasks"]
    assert task["taskId"] in [t["taskId"] for t in listed]
    result = other.call("tasks/result", {"taskId": task["taskId"]})["result"]
    assert result["structuredContent"] == {"result": "done 3"}
    assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task["taskId"]}


def test_tasks_result_blocks_until_the_task_ends(session):
    task = _create(session, "slow_job", {"steps": 4, "interval_ms": 100})
    result = session.call("tasks/result", {"taskId": task["taskId"]})["result"]
    assert result["structuredContent"] == {"result": "done 4"}


def test_required_task_support_rejects_a_plain_call_and_forbidden_rejects_a_task(session):
    plain = session.call("tools/call", {"name": "report_job", "arguments": {"rows": 2}})
    assert plain["error"]["code"] == -32601
    forbidden = session.call("tools/call", {"name": "echo", "arguments": {"text": "x"}, "task": {}})
    assert forbidden["error"]["code"] == -32601
    task = _create(session, "report_job", {"rows": 2})
    assert session.call("tasks/result", {"taskId": task["taskId"]})["result"]["content"][0]["text"] == "2 rows"


def test_cancel_a_working_task_then_cancelling_again_is_invalid(mcp_server, second_server):
    client = HttpClient(mcp_server.url)
    client.initialize()
    task = _create(client, "slow_job", {"steps": 100, "interval_ms": 50})
    other = client.on(second_server.url)
    cancelled = other.call("tasks/cancel", {"taskId": task["taskId"]})["result"]
    assert cancelled["status"] == "cancelled"
    assert client.call("tasks/get", {"taskId": task["taskId"]})["result"]["status"] == "cancelled"
    again = client.call("tasks/cancel", {"taskId": task["taskId"]})
    assert again["error"]["code"] == -32602
    assert client.call("tasks/result", {"taskId": task["taskId"]})["error"]["code"] == -32603


def test_tasks_of_another_session_are_not_found(mcp_server):
    owner, stranger = HttpClient(mcp_server.url), HttpClient(mcp_server.url)
    owner.initialize()
    stranger.initialize()
    task = _create(owner, "slow_job", {"steps": 1, "interval_ms": 1})
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        assert stranger.call(method, {"taskId": task["taskId"]})["error"]["code"] == -32602
    assert stranger.call("tasks/list")["result"]["tasks"] == []
    assert owner.call("tasks/get", {"taskId": "not-a-task"})["error"]["code"] == -32602


def test_failed_tool_makes_a_failed_task_with_its_error_result(session):
    task = _create(session, "soft_limited_job", {"seconds": 10})
    assert _poll(session, task["taskId"])["status"] == "failed"
    result = session.call("tasks/result", {"taskId": task["taskId"]})["result"]
    assert result["isError"] is True


def test_input_required_task_sends_its_elicitation_on_tasks_result(session):
    session.initialize(capabilities={"elicitation": {}})
    task = _create(session, "confirm_job", {"question": "Deploy?"})
    assert _poll(session, task["taskId"], until=("input_required",))["status"] == "input_required"
    stream = session.stream("POST", session.message("tasks/result", {"taskId": task["taskId"]}))
    request = None
    while request is None:
        event = stream.next_event()
        message = json.loads(event.data) if event.data else {}
        if message.get("method") == "elicitation/create":
            request = message
    assert request["params"]["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task["taskId"]}
    answer = {"jsonrpc": "2.0", "id": request["id"], "result": {"action": "accept", "content": {"confirm": True}}}
    assert session.request("POST", answer).status == 202
    final = [m for m in stream.messages() if "result" in m]
    assert final[-1]["result"]["content"][0]["text"] == "confirmed"
    assert _poll(session, task["taskId"])["status"] == "completed"


def test_status_notifications_go_on_the_get_stream(session):
    listener = session.stream("GET", headers={"Accept": "text/event-stream"})
    task = _create(session, "slow_job", {"steps": 1, "interval_ms": 1})
    statuses = []
    while "completed" not in statuses:
        event = listener.next_event()
        message = json.loads(event.data) if event.data else {}
        if message.get("method") == "notifications/tasks/status" and message["params"]["taskId"] == task["taskId"]:
            statuses.append(message["params"]["status"])
    listener.close()
    assert statuses[0] == "working" and statuses[-1] == "completed"

