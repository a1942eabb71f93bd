"""Background tools when things break: workers killed with SIGKILL, silent tools.

These tests run on their own queue, server and workers, so that killing a worker never touches
the jobs of other tests, and a job can only go to the worker the test kills."""
import json
import secrets

import pytest

from mcp_transport.testing import HttpClient

FAST = {"HEARTBEAT_SECONDS": 0.3, "KEEPALIVE_SECONDS": 1}
#: own_queue_server's settings (tests/integration/conftest.py).
SERVER_SETTINGS = FAST
#: Seconds a read waits for the next event: a deadline for a loaded machine (a pool process
#: killed or replaced, a worker starting), not a figure the tests measure.
READ_DEADLINE = 120


@pytest.fixture
def worker(start_worker, own_queue):
    started = start_worker(CELERY_QUEUE=own_queue)
    yield started
    started.stop()


def _client(server):
    client = HttpClient(server.url)
    client.initialize()
    return client


def _call(client, name, token="p", **arguments):
    return client.message("tools/call", {"name": name, "arguments": arguments, "_meta": {"progressToken": token}})


def _wait_for_progress(stream, count=1):
    seen = 0
    while seen < count:
        event = stream.next_event()
        assert event is not None, "the stream ended before the job reported progress"
        if event.data and json.loads(event.data).get("method") == "notifications/progress":
            seen += 1


def _answers(messages, call):
    return [m for m in messages if m.get("id") == call["id"] and "method" not in m]


def _progress(messages):
    return [m["params"]["progress"] for m in messages if m.get("method") == "notifications/progress"]


def test_killed_pool_process_gives_an_error_result_for_a_tool_not_declared_idempotent(own_queue_server, worker):
    client = _client(own_queue_server)
    call = _call(client, "tick_job", key=f"t-{secrets.token_hex(4)}", steps=100, interval_ms=50)
    stream = client.stream("POST", call)
    _wait_for_progress(stream)
    worker.kill_pool()  # SIGKILL the process running the tool; Celery's main process notices
    answers = _answers(stream.messages(timeout=READ_DEADLINE), call)
    assert len(answers) == 1
    result = answers[0]["result"]
    assert result["isError"] is True
    assert "was lost before it finished" in result["content"][0]["text"]
    assert "not declared idempotent" in result["content"][0]["text"]


def test_killed_pool_process_reruns_an_idempotent_tool(own_queue_server, worker):
    client = _client(own_queue_server)
    call = _call(client, "tick_job_idempotent", key=f"t-{secrets.token_hex(4)}", steps=6, interval_ms=100)
    stream = client.stream("POST", call)
    _wait_for_progress(stream, 2)
    worker.kill_pool()
    messages = stream.messages(timeout=20)
    answers = _answers(messages, call)
    assert len(answers) == 1 and answers[0]["result"]["structuredContent"] == {"result": 6}
    progress = _progress(messages)
    assert progress == sorted(set(progress))  # still strictly increasing across the two runs


def test_killed_worker_is_noticed_by_the_stream_and_answered_with_an_error(own_queue_server, worker):
    client = _client(own_queue_server)
    call = _call(client, "tick_job", key=f"t-{secrets.token_hex(4)}", steps=100, interval_ms=50)
    stream = client.stream("POST", call)
    _wait_for_progress(stream)
    worker.kill()  # the whole worker: no process is left to report anything
    answers = _answers(stream.messages(timeout=15), call)
    assert len(answers) == 1
    assert "was lost before it finished" in answers[0]["result"]["content"][0]["text"]


def test_idempotent_job_of_a_killed_worker_runs_again_on_the_next_worker(own_queue_server, worker, start_worker,
                                                                         own_queue):
    client = _client(own_queue_server)
    call = _call(client, "tick_job_idempotent", key=f"t-{secrets.token_hex(4)}", steps=4, interval_ms=100)
    stream = client.stream("POST", call)
    _wait_for_progress(stream)
    worker.kill()
    replacement = start_worker(CELERY_QUEUE=own_queue)
    try:
        answers = _answers(stream.messages(timeout=30), call)
    finally:
        replacement.stop()
    assert len(answers) == 1 and answers[0]["result"]["structuredContent"] == {"result": 4}


def test_a_silent_tool_gets_heartbeat_progress_that_keeps_increasing(own_queue_server, start_worker, own_queue):
    worker = start_worker(CELERY_QUEUE=own_queue, MCP_TRANSPORT_JSON=json.dumps(
        {"HEARTBEAT_SECONDS": 0.3, "PROGRESS_HEARTBEAT_SECONDS": 0.2}))
    try:
        client = _client(own_queue_server)
        call = _call(client, "slow_job", steps=2, interval_ms=700)
        messages = client.stream("POST", call).messages(timeout=READ_DEADLINE)
    finally:
        worker.stop()
    progress = _progress(messages)
    assert len(progress) >= 4  # the tool's own two, and beats while it slept
    assert all(a < b for a, b in zip(progress, progress[1:]))
    assert 1 in progress and progress[-1] == 2
    assert _answers(messages, call)[0]["result"]["structuredContent"] == {"result": "done 2"}


@pytest.fixture(scope="module")
def patient_server(start_server, own_queue):
    """The web process's default heartbeat limit (3 x 5 s), not FAST's 0.9 s: a job that runs in
    the pool process started in place of a killed one, whose first beats a loaded machine may delay
    past a second, is not taken for lost (it was, in a parallel run of the suite)."""
    return start_server(CELERY_QUEUE=own_queue, MCP_TRANSPORT_JSON=json.dumps({"KEEPALIVE_SECONDS": 1}))


def test_hard_time_limit_gives_an_error_result(patient_server, worker):
    client = _client(patient_server)
    call = _call(client, "hard_limited_job", seconds=10)
    answers = _answers(client.stream("POST", call).messages(timeout=READ_DEADLINE), call)
    assert len(answers) == 1 and answers[0]["result"]["isError"] is True
    assert "hard time limit of 2 s" in answers[0]["result"]["content"][0]["text"]
    follow_up = _call(client, "slow_job", steps=1, interval_ms=1)  # the new pool process works
    answer = _answers(client.stream("POST", follow_up).messages(timeout=READ_DEADLINE), follow_up)[0]
    assert "structuredContent" in answer["result"], answer


def test_a_burst_far_beyond_the_ring_reaches_the_client_whole(own_queue_server, start_worker, own_queue):
    """A sync tool's 2,000 reports in a burst against a ring of 20 events: the worker outruns the
    web process following the stream, Redis trims what it has not read, and it reads that from
    the database, which has it (worker.job_store), so every report arrives, once, in order."""
    burst_worker = start_worker(CELERY_QUEUE=own_queue, MCP_TRANSPORT_JSON=json.dumps({**FAST, "STREAM_MAXLEN": 20}))
    try:
        client = _client(own_queue_server)
        call = _call(client, "stamp_job", steps=2000, interval_ms=0)
        messages = client.stream("POST", call).messages()
    finally:
        burst_worker.stop()
    progress = _progress(messages)
    # On a failure, say how the stream ended: its last messages, and the server's log.
    ending = (len(messages), messages[-2:], own_queue_server.log()[-3000:])
    assert progress == list(range(1, 2001)), (progress[:3], progress[-3:], ending)
    assert [answer["result"]["content"][0]["text"] for answer in _answers(messages, call)] == ["done 2000"], ending
