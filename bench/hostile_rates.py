"""What one anonymous caller can make a server do, per method, with the rate limits set (issue 38):

    .venv/bin/python bench/hostile_rates.py [--seconds 10] [--events 10000] [--env KEY=VALUE ...]

Starts its own redis-server, a SQLite database, one daphne and one Celery worker of the example
project (``MCP_RATE_LIMIT=5/m``, and whatever ``--env`` adds: ``MCP_REQUEST_RATE_LIMIT``,
``MCP_SESSION_OPEN_RATE``). Then, from one client thread on one address:

1. each method, sent back to back for ``--seconds``: how many were answered (200, no error) per
   second, and how many refused;
2. a task of ``--events`` progress events, finished; then ``tasks/stream`` resumed ``after`` its
   last event, 20 times: the bytes Redis sent and the commands it received per resume (INFO's
   ``total_net_output_bytes``, ``total_commands_processed``; this run's Redis serves nobody else)
   and the milliseconds each took;
3. ``initialize`` then ``DELETE``, back to back for ``--seconds``: sessions opened per second.

Rates per second are over all of ``--seconds`` and over their second half: a token bucket gives
its N at once, then N per period.

Prints one JSON object. Loopback only; the stdlib and the project's test clients.
"""
import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import http.client

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcp_transport.testing import HttpClient, LiveServer, LiveWorker, ModernClient  # noqa: E402
from mcpserver.embedded_redis import EmbeddedRedis  # noqa: E402

TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


class From:
    """A test client's requests from one loopback address of its own (127.0.0.N): a caller of
    its own, whose budget no other part of the run spent."""

    def __init__(self, address):
        self.address = address

    def _send(self, method, body, headers, timeout):
        connection = http.client.HTTPConnection(self.host, self.port, timeout=timeout,
                                                source_address=(self.address, 0))
        connection.request(method, self.path, body=json.dumps(body).encode() if isinstance(body, (dict, list))
                           else body, headers=headers)
        return connection, connection.getresponse()


class Modern(From, ModernClient):
    def __init__(self, url, address, capabilities=None):
        From.__init__(self, address)
        ModernClient.__init__(self, url, capabilities)


class Legacy(From, HttpClient):
    def __init__(self, url, address):
        From.__init__(self, address)
        HttpClient.__init__(self, url)


def start(extra_env):
    store = EmbeddedRedis().start()
    prefix = f"benchrates{secrets.token_hex(3)}"
    db = Path(tempfile.mkdtemp(prefix="bench-rates-")) / "db.sqlite3"
    env = {**os.environ, "REDIS_URL": store.url, "MCP_KEY_PREFIX": prefix, "CELERY_QUEUE": prefix,
           "DATABASE_URL": f"sqlite:///{db}", "DJANGO_SETTINGS_MODULE": "mcpserver.settings",
           "PYTHONPATH": str(ROOT), "DJANGO_SECRET_KEY": secrets.token_urlsafe(50), "MCP_RATE_LIMIT": "5/m",
           **extra_env}
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    server = LiveServer(env=env, cwd=ROOT).start()
    worker = LiveWorker(queue=prefix, env={**env, "LOG_LEVEL": "WARNING"}, cwd=ROOT).start()
    return store, server, worker


def answered(reply) -> bool:
    if reply.status != 200:
        return False
    body = reply.body
    if reply.headers.get("content-type", "").startswith("text/event-stream"):
        return b'"error"' not in body
    return "error" not in json.loads(body)


def per_second(send, seconds):
    """Answered per second over ``seconds``, and over their second half (a bucket's burst spent)."""
    served, late, refused = 0, 0, 0
    started = time.monotonic()
    half, until = started + seconds / 2, started + seconds
    while (now := time.monotonic()) < until:
        if answered(send()):
            served += 1
            late += now >= half
        else:
            refused += 1
    return {"answered_per_s": round(served / seconds, 1), "second_half_per_s": round(late / (seconds / 2), 1),
            "refused": refused}


def a_task(url, events):
    client = Modern(url, "127.0.0.250", TASKS)
    created = client.post("tools/call", {"name": "export_report", "arguments": {"rows": events, "delay": 0},
                                          "_meta": {"progressToken": "p"}}).json["result"]
    task_id = created["taskId"]
    while client.post("tasks/get", {"taskId": task_id}).json["result"]["status"] != "completed":
        time.sleep(0.2)
    return client, task_id


def methods(url):
    """(name, send) of each method, each from an address of its own (127.0.0.2, .3 ...)."""
    addresses = (f"127.0.0.{n}" for n in range(2, 250))

    def modern(method, params=None, capabilities=None):
        client = Modern(url, next(addresses), capabilities)
        return lambda: client.post(method, params)

    def own_task():
        client = Modern(url, next(addresses), TASKS)
        created = client.post("tools/call", {"name": "export_report", "arguments": {"rows": 1, "delay": 0}})
        params = {"taskId": created.json["result"]["taskId"]}
        return lambda: client.post("tasks/get", params)

    def legacy(method, params=None):
        client = Legacy(url, next(addresses))
        client.initialize()
        return lambda: client.request("POST", client.message(method, params or {}))

    return [
        ("tools/call echo (2026)", lambda: modern("tools/call", {"name": "echo", "arguments": {"text": "x"}})),
        ("resources/list (2026)", lambda: modern("resources/list")),
        ("resources/read (2026)", lambda: modern("resources/read", {"uri": "test://static-text"})),
        ("prompts/get (2026)", lambda: modern("prompts/get", {"name": "test_simple_prompt"})),
        ("skills/list (2026)", lambda: modern("skills/list")),
        ("tasks/get (2026)", own_task),
        ("tools/list (2026)", lambda: modern("tools/list")),
        ("tools/call echo (2025)", lambda: legacy("tools/call", {"name": "echo", "arguments": {"text": "x"}})),
        ("resources/list (2025)", lambda: legacy("resources/list")),
        ("ping (2025)", lambda: legacy("ping")),
    ]


def resumes(store, client, task_id, count=20):
    """Each resume ``after`` the task's last event: Redis's output bytes and commands, and ms."""
    last = None
    stream = client.open("tasks/stream", {"taskId": task_id})
    for event in stream.messages(timeout=120):
        if event.get("method") == "notifications/tasks/event":
            last = event["params"]["seq"]
    info = redis.Redis.from_url(store.url)
    out, commands, took, sizes = [], [], [], []
    for _ in range(count):
        before = info.info("stats")
        started = time.perf_counter()
        reply = client.post("tasks/stream", {"taskId": task_id, "after": last})
        took.append((time.perf_counter() - started) * 1000)
        after = info.info("stats")
        assert reply.status == 200, (reply.status, reply.body)
        sizes.append(len(reply.body))
        out.append(after["total_net_output_bytes"] - before["total_net_output_bytes"])
        commands.append(after["total_commands_processed"] - before["total_commands_processed"] - 1)
    return {"events": last + 1, "answer_bytes": statistics.median(sizes),
            "redis_bytes_out_per_resume": statistics.median(out), "redis_commands_per_resume": statistics.median(commands),
            "ms_per_resume_median": round(statistics.median(took), 1)}


def session_churn(url, seconds):
    def open_and_delete():
        client = Legacy(url, "127.0.0.251")
        reply = client.request("POST", client.message("initialize", {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "churn", "version": "0"}}),
            session=False)
        if reply.status == 200:
            client.session_id = reply.headers["mcp-session-id"]
            client.delete()
        return reply
    return per_second(open_and_delete, seconds)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the server and worker")
    options = parser.parse_args()
    extra = dict(item.split("=", 1) for item in options.env)
    store, server, worker = start(extra)
    try:
        client, task_id = a_task(server.url, options.events)
        report = {"env": {"MCP_RATE_LIMIT": "5/m", **extra}, "seconds": options.seconds}
        report["tasks/stream resume after the last event"] = resumes(store, client, task_id)
        report["methods"] = {}
        for name, make in methods(server.url):
            report["methods"][name] = per_second(make(), options.seconds)
        report["initialize + DELETE"] = session_churn(server.url, options.seconds)
        print(json.dumps(report, indent=1))
    finally:
        worker.stop()
        server.stop()
        store.stop()


if __name__ == "__main__":
    main()
