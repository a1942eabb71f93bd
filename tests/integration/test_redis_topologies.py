"""The whole stack on a Redis Sentinel set and on a Redis Cluster (private redis-server processes,
tests/conftest.py): two daphnes and a Celery worker per topology, the official SDK client, calls
with progress, background calls, a cancel across processes, and a master killed mid-stream that
loses nothing. The broker is kombu's Sentinel transport on the Sentinel set, RabbitMQ on the
Cluster (Celery has no Cluster transport)."""
import json
import os
import socket
import subprocess
import sys
import time

import pytest
from mcp import Client

from mcp_transport.testing import LiveWorker
from mcpserver.redis_topologies import key_slot

from .load import (LegacyCall, ModernCall, ModernTask, cancel_crosses_processes, delete_crosses_processes,
                   first_answer_seconds, worker_gave_up)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

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
def topology_worker(topology_env, server_env):
    """A three-slot worker (the background calls under load run at once)."""
    env = {**server_env, "LOG_LEVEL": "INFO", "MCP_TRANSPORT_JSON": json.dumps({"HEARTBEAT_SECONDS": 0.3}),
           **topology_env}
    worker = LiveWorker(queue=env["CELERY_QUEUE"], env=env, cwd=ROOT, concurrency=3).start()
    yield worker
    worker.stop()


@pytest.fixture(scope="module")
def servers(topology_env, start_server, topology_worker):
    """Two daphnes, and the worker."""
    return start_server(**topology_env), start_server(**topology_env)


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
    cancel_crosses_processes(servers[0].url, servers[1].url)


def test_a_delete_on_one_process_ends_the_session_on_the_other(servers):
    delete_crosses_processes(servers[0].url, servers[1].url)


def test_a_master_killed_under_load_loses_nothing(servers, topology, topology_worker):
    """Both eras in flight across both daphnes (2025-11-25 inline and background calls with
    progress, resumed on the other process whenever a stream ends; 2026-07-28 inline calls and a
    task polled on either process) when the master holding the app's keys dies: each call ends
    with its own result and every progress report once; afterwards new calls work on both
    processes within 5 s of the new master, and a cancel and a DELETE still cross processes.

    A third background call waits for its caller's place (the worker's share per caller is two
    of its three slots) across the failover: it runs only if the worker outlived it. On the
    Sentinel set the failover is the broker's too, and kombu's Redis channel, closed halfway on
    the lost connection, stopped the worker ("Unrecoverable error": AttributeError) once its
    running jobs ended, and the waiting call with it."""
    kind, redis = topology
    urls = [server.url for server in servers]
    turns = [urls, urls[::-1]]
    # Long enough to outlast the failover (Sentinel about 3 s, Cluster about 15 s), checked below.
    interval = 300 if kind == "sentinel" else 750
    inline, background = {"steps": 40, "interval_ms": interval}, {"steps": 20, "interval_ms": 2 * interval}
    calls = [LegacyCall(turns[0], "slow_progress", **inline), LegacyCall(turns[1], "slow_progress", **inline),
             LegacyCall(turns[0], "slow_job", **background), ModernCall(turns[1], "slow_progress", **inline),
             ModernCall(turns[0], "slow_progress", **inline), ModernTask(turns[1], "slow_job", **background)]
    for call in calls:
        call.start()
    for call in calls:
        assert call.first_progress.wait(60) and call.error is None, (call.name, call.error)
    waiting = LegacyCall(turns[1], "slow_job", steps=3, interval_ms=interval).start()
    while not waiting.started:  # taken and queued: its first progress comes after a place is free
        assert waiting.error is None and waiting.thread.is_alive(), waiting.error
        time.sleep(0.05)
    calls.append(waiting)
    killed_at = time.monotonic()
    if kind == "sentinel":
        old, _new = redis.kill_master()
    else:
        old, _new = redis.kill_master(key_slot("{" + os.environ["MCP_KEY_PREFIX"] + "}"))
    failover = time.monotonic() - killed_at
    in_flight = sum(call.thread.is_alive() for call in calls)
    try:
        back = [first_answer_seconds(url, era) for url in urls for era in ("2025-11-25", "2026-07-28")]
        for call in calls:
            call.join()
    finally:
        redis.restart(old)
    logs = "\n".join(server.log()[-3000:] for server in servers)
    assert in_flight == len(calls), f"only {in_flight} calls were still running when the failover ended ({failover:.1f} s)"
    ended = [(call.era, call.kind, call.outcome(), call.notes) for call in calls]
    completed = sum(outcome == "result" for _era, _kind, outcome, _notes in ended)
    print(f"\n{kind} failover: {completed} of {len(calls)} calls in flight completed")
    assert completed == len(calls), f"{ended}\n{logs}\n{worker_gave_up(topology_worker)}"
    assert topology_worker.process.poll() is None and not worker_gave_up(topology_worker), \
        worker_gave_up(topology_worker)
    streamed = [call for call in calls if call.kind != "task"]
    assert [call.lost_and_duplicated() for call in streamed] == [(0, 0)] * len(streamed), \
        [call.progress for call in streamed]
    print(f"\n{kind} master killed under load: failover {failover:.1f} s, {len(calls)} calls whole, "
          f"{sum(getattr(call, 'resumed', 0) for call in calls)} resumes; first echo after the failover "
          f"{max(back):.2f} s")
    assert max(back) < 5, back
    cancel_crosses_processes(servers[0].url, servers[1].url)
    delete_crosses_processes(servers[0].url, servers[1].url)
