"""Concurrent calls counted for every kind of call (quotas.py): a session's background jobs and
tasks count against MAX_CALLS_PER_SESSION until they end, whoever ends them (a cancel, their
worker, a killed worker noticed later); sessionless 2026-07-28 calls count per caller against
MAX_CALLS_PER_CALLER (its principal with authorization on, else its address), tasks included.

Real daphne, Redis and Celery workers of the tests' own queue (a killed worker touches no other
test's jobs, and the long jobs here hold no slot of the shared worker)."""
import itertools
import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from mcp_transport.testing import HttpClient, ModernClient

ROOT = Path(__file__).resolve().parents[2]
#: A deadline for a loaded machine (a worker noticed lost, a job cancelled), not a measured figure.
DEADLINE = 90
FAST = {"HEARTBEAT_SECONDS": 0.3, "KEEPALIVE_SECONDS": 1, "TRUSTED_PROXIES": ["127.0.0.1"]}
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
LONG_JOB = {"name": "slow_job", "arguments": {"steps": 100_000, "interval_ms": 50}}
FOREVER = {"name": "slow_progress", "arguments": {"steps": 100_000, "interval_ms": 10_000}}  # the bounds' longest
ECHO = {"name": "echo", "arguments": {"text": "served"}}
_addresses = (f"198.51.100.{n}" for n in itertools.count(101))


@pytest.fixture(scope="module")
def queue():
    return f"{os.environ['MCP_KEY_PREFIX']}-limits-{secrets.token_hex(2)}"


@pytest.fixture(scope="module")
def worker(start_worker, queue):
    started = start_worker(CELERY_QUEUE=queue)
    yield started
    started.stop()


@pytest.fixture(scope="module")
def store():
    return redis.Redis.from_url(os.environ["REDIS_URL"], decode_responses=True)


def refusals(store, limit):
    return int(store.hget(f"{os.environ['MCP_KEY_PREFIX']}:metrics", f"limit_refusals:{limit}") or 0)


def until(condition, what, timeout=DEADLINE):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, what
        time.sleep(0.1)
    return value


def assert_refused(reply, request_id, limit):
    """Today's MAX_CALLS_PER_SESSION refusal: 429, Retry-After: 1, a -32600 error with the id."""
    assert reply.status == 429, (reply.status, reply.body)
    assert reply.headers["retry-after"] == "1"
    body = reply.json
    assert body["id"] == request_id and body["error"]["code"] == -32600, body
    assert f"{limit} requests at once" in body["error"]["message"], body


def echo_status(client, **extra):
    message = client.message("tools/call", ECHO)
    return client.request("POST", message, extra.get("headers")).status


def wait_for_progress(stream):
    while True:
        event = stream.next_event(timeout=DEADLINE)
        assert event is not None, "the stream ended before the job reported progress"
        if event.data and json.loads(event.data).get("method") == "notifications/progress":
            return


# -- a session's background jobs --------------------------------------------------------------------

@pytest.fixture(scope="module")
def session_server(start_server, queue, worker):
    server = start_server(CELERY_QUEUE=queue, MCP_TRANSPORT_JSON=json.dumps({**FAST, "MAX_CALLS_PER_SESSION": 1}))
    yield server
    server.stop()


def task_status(client, task_id):
    return client.call("tasks/get", {"taskId": task_id})["result"]["status"]


def test_a_session_s_background_jobs_and_tasks_count_until_they_end(session_server, store):
    """One call at most: a running job, a queued or running task refuse the next call; a
    cancelled job, a cancelled task and a finished task free the place."""
    before = refusals(store, "calls_per_session")
    client = HttpClient(session_server.url)
    client.initialize()
    plain = client.message("tools/call", {"_meta": {"progressToken": "p"}, **LONG_JOB})
    following = client.stream("POST", plain)
    try:
        wait_for_progress(following)
        message = client.message("tools/call", ECHO)
        assert_refused(client.request("POST", message), message["id"], 1)
        other = HttpClient(session_server.url)  # another session is not affected
        other.initialize()
        assert echo_status(other) == 200
        cancel = client.message("notifications/cancelled", {"requestId": plain["id"]}, request_id=False)
        assert client.request("POST", cancel).status == 202
        until(lambda: echo_status(client) == 200, "the cancelled job still counts")
    finally:
        following.connection.close()

    long_task = client.call("tools/call", {**LONG_JOB, "task": {}})["result"]["task"]  # task-augmented
    message = client.message("tools/call", ECHO)
    assert_refused(client.request("POST", message), message["id"], 1)
    assert client.call("tasks/cancel", {"taskId": long_task["taskId"]})["result"]["status"] == "cancelled"
    until(lambda: echo_status(client) == 200, "the cancelled task still counts")

    short = {"name": "slow_job", "arguments": {"steps": 2, "interval_ms": 10}, "task": {}}
    short_task = client.call("tools/call", short)["result"]["task"]
    until(lambda: task_status(client, short_task["taskId"]) == "completed", "the task did not finish")
    assert echo_status(client) == 200  # a finished task's place is free
    until(lambda: refusals(store, "calls_per_session") > before, "the refusal was not counted")


def test_a_job_whose_worker_is_killed_leaks_no_place(start_server, start_worker, queue):
    """kill -9 of the whole worker while nobody follows the job: the next call the session is
    refused finds the job lost (its heartbeat stopped), ends it and is served."""
    own_queue = f"{queue}-kill"  # the job can only go to the worker killed here
    server = start_server(CELERY_QUEUE=own_queue, MCP_TRANSPORT_JSON=json.dumps({**FAST, "MAX_CALLS_PER_SESSION": 1}))
    doomed = start_worker(CELERY_QUEUE=own_queue)
    try:
        client = HttpClient(server.url)
        client.initialize()
        job = client.message("tools/call", {"name": "tick_job", "_meta": {"progressToken": "p"},
                                            "arguments": {"key": f"t-{secrets.token_hex(4)}", "steps": 100_000,
                                                          "interval_ms": 50}})
        stream = client.stream("POST", job)
        wait_for_progress(stream)
        stream.connection.close()  # nobody follows it now (2025-11-25: a disconnect cancels nothing)
        message = client.message("tools/call", ECHO)
        assert_refused(client.request("POST", message), message["id"], 1)
        doomed.kill()
        until(lambda: echo_status(client) == 200, "the killed worker's job still holds the session's place")
        resumed = client.call("tools/call", ECHO)
        assert resumed["result"]["structuredContent"] == {"result": "served"}
    finally:
        doomed.stop()
        server.stop()


# -- 2026-07-28 callers ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def caller_server(start_server, queue, worker):
    server = start_server(CELERY_QUEUE=queue, MCP_TRANSPORT_JSON=json.dumps({**FAST, "MAX_CALLS_PER_CALLER": 2}))
    yield server
    server.stop()


class Caller(ModernClient):
    """A 2026-07-28 client behind the trusted proxy (127.0.0.1), at ``address``."""

    def __init__(self, server, address, capabilities=TASKS, token=None):
        super().__init__(server.url, capabilities)
        self.address, self.token = address, token

    def headers(self, extra=None, session=True):
        return super().headers({"X-Forwarded-For": self.address, **(extra or {})}, session)


def test_modern_calls_are_capped_per_address_tasks_included(caller_server, store):
    before = refusals(store, "calls_per_caller")
    address = next(_addresses)
    caller = Caller(caller_server, address)
    inline = caller.open("tools/call", FOREVER)
    try:
        created = caller.post("tools/call", {"name": "slow_compute", "arguments": {"seconds": 600}}).json["result"]
        assert created["resultType"] == "task", created
        refused = caller.post("tools/call", ECHO, request_id=77)
        assert_refused(refused, 77, 2)
        background = caller.post("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}}, request_id=78)
        assert_refused(background, 78, 2)  # a new task is a call too
        served = Caller(caller_server, next(_addresses)).post("tools/call", ECHO)  # another address
        assert served.status == 200 and served.json["result"]["structuredContent"] == {"result": "served"}

        assert caller.post("tasks/cancel", {"taskId": created["taskId"]}).status == 200
        assert caller.post("tools/call", ECHO).status == 200  # the cancelled task's place is free
    finally:
        inline.connection.close()  # closing the response cancels the inline call (2026-07-28)
    until(lambda: Caller(caller_server, address, {}).post("tools/call", ECHO).status == 200,
          "the cancelled inline call still counts")
    until(lambda: refusals(store, "calls_per_caller") > before, "the refusal was not counted")


def test_a_call_that_hands_its_work_to_two_tasks_funds_only_one(caller_server):
    """A tool's ``asyncio.gather`` of two ``run_as_task`` calls: the call is one place, so the
    second task is refused rather than run uncounted, and the caller keeps its other place."""
    caller = Caller(caller_server, next(_addresses))
    escalated = caller.post("tools/call", {"name": "escalate_twice", "arguments": {}}).json["result"]
    assert escalated["resultType"] == "task", escalated
    started = [escalated["taskId"]]
    try:
        other = caller.post("tools/call", {"name": "slow_compute", "arguments": {"seconds": 600}}, request_id=81)
        assert other.status == 200, "the escalation took both of the caller's places"
        started.append(other.json["result"]["taskId"])
        assert_refused(caller.post("tools/call", ECHO, request_id=82), 82, 2)
    finally:
        for task_id in started:
            assert caller.post("tasks/cancel", {"taskId": task_id}).status == 200


def test_a_modern_background_call_counts_until_its_job_ends(caller_server):
    address = next(_addresses)
    caller = Caller(caller_server, address, {})
    plain = [caller.open("tools/call", LONG_JOB, timeout=DEADLINE) for _ in range(2)]
    try:
        for stream in plain:
            assert stream.status == 200
        refused = caller.post("tools/call", ECHO, request_id=79)
        assert_refused(refused, 79, 2)
    finally:
        for stream in plain:
            stream.connection.close()  # disconnect = cancel: the jobs end, their places are free
    until(lambda: caller.post("tools/call", ECHO).status == 200, "the cancelled jobs still count")


def manage(server_env, *args) -> str:
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env={**os.environ, **server_env},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_with_authorization_on_modern_calls_are_capped_per_principal(start_server, server_env, queue, worker):
    server = start_server(MCP_AUTH="on", CELERY_QUEUE=queue,
                          MCP_TRANSPORT_JSON=json.dumps({**FAST, "MAX_CALLS_PER_CALLER": 1}))
    try:
        tokens = [manage(server_env, "mcp_tokens", "create", "--user", f"limits-{secrets.token_hex(4)}")
                  .strip().splitlines()[-1] for _ in range(2)]
        address = next(_addresses)  # both from one address: the principal is what counts
        first, second = (Caller(server, address, token=token) for token in tokens)
        running = first.open("tools/call", FOREVER)
        try:
            assert running.status == 200
            assert_refused(first.post("tools/call", ECHO, request_id=80), 80, 1)
            assert second.post("tools/call", ECHO).status == 200
        finally:
            running.connection.close()
    finally:
        server.stop()
