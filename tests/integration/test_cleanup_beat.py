"""The scheduled cleanup for real: a Celery worker with beat (as `make run` starts it) runs
mcp_transport.cleanup on its schedule and deletes event rows past EVENT_RETENTION."""
import json
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import redis

from mcp_transport.testing import HttpClient

ROOT = Path(__file__).resolve().parents[2]


def own_broker(url: str) -> str:
    """The same Redis server, another database: no other worker in the suite takes these tasks."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/8" if parts.path == "/7" else "/7"))


def manage_show(server_env, session_id) -> dict:
    done = subprocess.run([sys.executable, "manage.py", "mcp_sessions", "show", "--json", "--", session_id],
                          cwd=ROOT, env={**os.environ, **server_env}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def until(predicate, timeout=90, every=0.2):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(every)
    return value


@contextmanager
def beat_worker(server_env, folder, settings=None):
    """``celery worker -B``, as scripts/run.py starts it, cleaning up every second (``settings``:
    its MCP_TRANSPORT keys; by default every event row is past its retention)."""
    settings = {"EVENT_RETENTION": 0} if settings is None else settings
    env = {**os.environ, **server_env, "CELERY_BROKER_URL": own_broker(server_env["REDIS_URL"]),
           "MCP_CLEANUP_INTERVAL": "1", "MCP_TRANSPORT_JSON": json.dumps(settings)}
    log_path = folder / "worker.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "mcpserver", "worker", "-B", "--schedule",
             str(folder / "celerybeat-schedule"), "--pool", "solo", "--loglevel", "INFO"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield process, log_path
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_beat_runs_the_cleanup_in_a_worker(mcp_server, server_env, tmp_path):
    client = HttpClient(mcp_server.url)
    client.initialize()
    call = client.message("tools/call", {"name": "slow_progress", "arguments": {"steps": 3, "interval_ms": 1},
                                            "_meta": {"progressToken": "p"}})
    assert len(client.stream("POST", call).events()) == 5
    until(lambda: manage_show(server_env, client.session_id)["buffered"]["database"] == 5, every=0.5)

    counters = redis.Redis.from_url(server_env["REDIS_URL"], decode_responses=True)
    metrics_key = f"{server_env['MCP_KEY_PREFIX']}:metrics"
    before = int(counters.hget(metrics_key, "cleanup_deleted:events") or 0)
    with beat_worker(server_env, tmp_path) as (process, log_path):
        until(lambda: int(counters.hget(metrics_key, "cleanup_deleted:events") or 0) >= before + 5)
        shown = manage_show(server_env, client.session_id)
        assert process.poll() is None
        worker_log = log_path.read_text()
    assert shown["buffered"]["database"] == 0
    assert shown["buffered"]["store"] == 5  # Redis keeps its copy for STREAM_TTL: the retention is the database's
    assert shown["state"] == "ready"  # the session itself is untouched
    assert "Sending due task mcp-transport-cleanup (mcp_transport.cleanup)" in worker_log
    assert "mcp_transport.cleanup" in worker_log and "succeeded" in worker_log
