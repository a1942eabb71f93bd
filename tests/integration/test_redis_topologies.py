"""The whole stack on a Redis Sentinel set and on a Redis Cluster (private redis-server processes,
tests/conftest.py): two daphnes and a Celery worker per topology, the official SDK client, calls
with progress, background calls, a cancel across processes, and a master killed mid-stream that
loses nothing. The broker is kombu's Sentinel transport on the Sentinel set, RabbitMQ on the
Cluster (Celery has no Cluster transport)."""
import http.client
import json
import os
import socket
import subprocess
import sys
import time

import pytest
from mcp import Client

from mcp_transport.testing import HttpClient
from mcpserver.redis_topologies import key_slot

from .test_cross_instance import _next_message

pytestmark = [pytest.mark.filterwarnings("ignore:The logging capability is deprecated")]

RABBITMQ = os.environ.get("MCP_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672//")


def rabbitmq_answers() -> bool:
    try:
        socket.create_connection(("127.0.0.1", 5672), timeout=1).close()
        return True
    except OSError:
        return False


@pytest.fixture(scope="module", params=["sentinel", "cluster"])
def topology(request):
    if request.param == "cluster" and not rabbitmq_answers():
        pytest.skip("the Cluster's broker is RabbitMQ, and none answers on 127.0.0.1:5672")
    return request.param, request.getfixturevalue("sentinel_set" if request.param == "sentinel" else "redis_cluster")


@pytest.fixture(scope="module")
def topology_env(topology):
    kind, redis = topology
    env = {"REDIS_URL": redis.url}
    if kind == "cluster":
        env["CELERY_BROKER_URL"] = RABBITMQ
    return env


@pytest.fixture(scope="module")
def servers(topology_env, start_server, start_worker):
    first, second = start_server(**topology_env), start_server(**topology_env)
    start_worker(**topology_env)
    return first, second


def test_manage_check_passes_and_the_cache_works(topology_env, server_env):
    code = ("from django.core.cache import cache; cache.set('topology', 1); cache.incr('topology'); "
            "print(cache.get('topology'))")
    env = {**os.environ, **server_env, **topology_env, "DJANGO_DEBUG": "1"}
    check = subprocess.run([sys.executable, "manage.py", "check"], env=env, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    shell = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], env=env, capture_output=True, text=True)
    assert shell.stdout.split()[-1] == "2", shell.stdout + shell.stderr


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_call_with_progress_and_a_background_call(servers, mode):
    seen, background = [], []

    async def on_progress(progress, total, message):
        seen.append(progress)

    async def on_job_progress(progress, total, message):
        background.append(progress)

    async with Client(servers[0].url, mode=mode) as client:
        result = await client.call_tool("slow_progress", {"steps": 5, "interval_ms": 10}, progress_callback=on_progress)
        job = await client.call_tool("slow_job", {"steps": 3, "interval_ms": 10}, progress_callback=on_job_progress)
    assert result.content[0].text == "done 5" and seen == [1, 2, 3, 4, 5]
    assert job.content[0].text == "done 3" and background[:3] == [1, 2, 3]


def test_a_cancel_sent_to_the_other_process_stops_the_tool(servers):
    first = HttpClient(servers[0].url)
    first.initialize()
    call = first.message("tools/call", {"name": "slow_progress", "arguments": {"steps": 100, "interval_ms": 50},
                                         "_meta": {"progressToken": 1}})
    stream = first.stream("POST", call)
    stream.next_event()  # priming
    stream.next_event()  # first progress: the tool runs
    cancel = first.message("notifications/cancelled", {"requestId": call["id"]}, request_id=False)
    assert first.on(servers[1].url).request("POST", cancel).status == 202
    rest = stream.messages(timeout=10)
    assert all("result" not in m and "error" not in m for m in rest)
    assert len(rest) < 60


def test_a_delete_on_one_process_ends_the_session_on_the_other(servers):
    first = HttpClient(servers[0].url)
    first.initialize()
    assert first.on(servers[1].url).delete().status == 200  # was 500 on the Cluster: a pipelined MGET
    assert first.request("POST", first.message("ping")).status == 404


def test_a_master_killed_mid_stream_loses_nothing(servers, topology):
    """Progress events before, during and after the failover arrive once each, in order, and the
    result once; the client resumes on the other process when its stream ends."""
    kind, redis = topology
    first = HttpClient(servers[0].url)
    first.initialize()
    steps = 60
    call = first.message("tools/call", {"name": "slow_progress", "arguments": {"steps": steps, "interval_ms": 100},
                                         "_meta": {"progressToken": "t"}})
    stream = first.stream("POST", call, timeout=120)
    stream.next_event()  # priming
    seen = [_next_message(stream) for _ in range(3)]
    if kind == "sentinel":
        old, _new = redis.kill_master()
    else:
        old, _new = redis.kill_master(key_slot("{" + os.environ["MCP_KEY_PREFIX"] + "}"))
    try:
        seen += _drain(first, stream, servers[1].url, call["id"])
    finally:
        redis.restart(old)
    progress = [m["params"]["progress"] for m in seen if m.get("method") == "notifications/progress"]
    logs = "\n".join(server.log()[-4000:] for server in servers)
    assert progress == list(range(1, steps + 1)), f"{progress}\n{logs}"
    results = [m for m in seen if m.get("id") == call["id"]]
    assert len(results) == 1 and results[0]["result"]["content"][0]["text"] == f"done {steps}", f"{results}\n{logs}"


def _drain(client, stream, other_url, request_id, resumes=8, quiet=12.0):
    """Every message until the response, resuming on ``other_url`` whenever the stream ends,
    breaks or stays silent for ``quiet`` seconds (shorter than the keep-alive interval: a stream
    that only keeps alive is given up, as a client would)."""
    messages = []
    for _ in range(resumes + 1):
        try:
            while (event := stream.next_event(timeout=quiet)) is not None:
                if event.data:
                    messages.append(json.loads(event.data))
                    if messages[-1].get("id") == request_id:
                        return messages
        except (OSError, http.client.HTTPException):
            pass  # broke or silent: resume
        last = stream.decoder.last_event_id
        stream.close()
        stream = _resume(client.on(other_url), last)
    raise AssertionError(f"no response after {resumes} resumes: {json.dumps(messages)[-500:]}")


def _resume(client, last_event_id, attempts=30):
    """A GET with Last-Event-ID, tried again while the server answers 503 (Redis failing over)."""
    for _ in range(attempts):
        stream = client.stream("GET", headers={"Accept": "text/event-stream", "Last-Event-ID": last_event_id},
                               timeout=60)
        if stream.status == 200:
            return stream
        assert stream.status == 503, stream.status
        stream.close()
        time.sleep(1)
    raise AssertionError("the resume was refused for 30 s")
