"""Another caller's wait while two callers hog a shared resource (issue 38, classes 3, 4 and 8).

    .venv/bin/python bench/shares.py [threads|polls|jobs ...] [--seconds 8]

Starts its own redis-server (the embedded one), a SQLite database and one daphne trusting
X-Forwarded-For from loopback (each client says its own address), and for ``jobs`` a Celery
worker of two pool processes. Then, per scenario:

- ``threads``: a third address's sync ``whoami`` (2025-11-25 session), alone and while two
  addresses run six ``count_inline`` calls each (three sessions apiece) of ``--seconds``;
- ``polls``: an address's task creation (2026-07-28 ``slow_job`` task, no worker: it stays
  queued), alone and while another address polls ``tasks/get`` on 32 connections;
- ``jobs``: two addresses each send three ``slow_job`` jobs of ``--seconds``; once their first
  ones run, a third address sends a short one (2025-11-25 session) and the first hog's first
  job is cancelled: when the victim's job and the hogs' second jobs start after that slot
  came free.

Prints one JSON object per scenario (milliseconds, or seconds for ``jobs``).
"""
import argparse
import json
import os
import secrets
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcp_transport.testing import HttpClient, LiveServer, LiveWorker, ModernClient  # noqa: E402
from mcpserver.embedded_redis import EmbeddedRedis  # noqa: E402

TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


class At:
    """A client mixin: requests say they come from ``address`` (X-Forwarded-For)."""

    def __init__(self, url, address, *args):
        super().__init__(url, *args)
        self.address = address

    def headers(self, extra=None, session=True):
        return super().headers({"X-Forwarded-For": self.address, **(extra or {})}, session)


class SessionAt(At, HttpClient):
    pass


class CallerAt(At, ModernClient):
    pass


class Stack:
    """Redis, a database, a daphne (and a worker): this run's own."""

    def __init__(self, worker=False):
        self.redis = EmbeddedRedis().start()
        self.db = Path(tempfile.mkdtemp(prefix="bench-shares-")) / "db.sqlite3"
        prefix = f"benchshares{secrets.token_hex(3)}"
        self.env = {"REDIS_URL": self.redis.url, "MCP_KEY_PREFIX": prefix, "CELERY_QUEUE": prefix,
                    "DATABASE_URL": f"sqlite:///{self.db}", "DJANGO_SETTINGS_MODULE": "mcpserver.settings",
                    "PYTHONPATH": str(ROOT), "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
                    "MCP_MAX_SESSIONS_PER_ADDRESS": "1000000",
                    "MCP_TRANSPORT_JSON": json.dumps({"TRUSTED_PROXIES": ["127.0.0.1"], "HEARTBEAT_SECONDS": 0.3})}
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT,
                       env={**os.environ, **self.env}, check=True)
        self.server = LiveServer(env=self.env, cwd=ROOT).start()
        self.worker = LiveWorker(queue=prefix, env=self.env, cwd=ROOT, concurrency=2).start() if worker else None

    def stop(self):
        for part in (self.worker, self.server):
            if part is not None:
                part.stop()
        self.redis.stop()

    def started_at(self, job_id, column="started_at"):
        with sqlite3.connect(self.db) as db:
            row = db.execute(f"SELECT {column} FROM mcp_transport_mcpjob WHERE id = ?", [job_id]).fetchone()
        return datetime.fromisoformat(row[0]).replace(tzinfo=timezone.utc).timestamp() if row and row[0] else None

    def jobs_of_session(self, session_id):
        with sqlite3.connect(self.db) as db:
            return [row[0] for row in db.execute("SELECT id FROM mcp_transport_mcpjob WHERE session_id = ?",
                                                 [session_id])]


def timed_ms(action) -> float:
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


def until(condition, deadline=120.0):
    end = time.monotonic() + deadline
    while not condition():
        assert time.monotonic() < end, "the run did not reach its state"
        time.sleep(0.05)


def threads(stack, seconds):
    url = stack.server.url
    victim = SessionAt(url, "10.38.3.3")
    victim.initialize()
    whoami = {"name": "whoami", "arguments": {}}
    alone = [timed_ms(lambda: victim.call("tools/call", whoami)) for _ in range(10)]
    streams, counters = [], []
    for hog in ("10.38.3.1", "10.38.3.2"):
        for number in range(3):
            session = SessionAt(url, hog)
            session.initialize()
            for call in range(2):
                counter = f"bench-{secrets.token_hex(4)}"
                arguments = {"key": counter, "steps": int(seconds * 20), "interval_ms": 50}
                message = session.message("tools/call", {"name": "count_inline", "arguments": arguments})
                streams.append(session.stream("POST", message, timeout=seconds * 10))
                counters.append(counter)
    time.sleep(1)  # the hogs' calls take their threads
    loaded = timed_ms(lambda: victim.call("tools/call", whoami))
    for stream in streams:
        stream.close()
    return {"scenario": "threads", "whoami_alone_ms": round(statistics.median(alone), 1),
            "whoami_with_two_hogs_ms": round(loaded, 1), "hog_call_seconds": seconds}


def polls(stack, _seconds):
    url = stack.server.url
    victim, hog = CallerAt(url, "10.38.8.3", TASKS), CallerAt(url, "10.38.8.1", TASKS)
    job = {"name": "slow_job", "arguments": {"steps": 1, "interval_ms": 1}}

    def creations(count=20):
        return [timed_ms(lambda: victim.post("tools/call", job)) for _ in range(count)]
    creations(5)  # warm
    alone = creations()
    task = hog.post("tools/call", job).json["result"]["taskId"]
    stop, done = threading.Event(), [0]

    def poll():
        while not stop.is_set():
            hog.post("tasks/get", {"taskId": task})
            done[0] += 1
    pollers = [threading.Thread(target=poll) for _ in range(32)]
    for poller in pollers:
        poller.start()
    time.sleep(2)
    loaded = creations()
    stop.set()
    for poller in pollers:
        poller.join()
    return {"scenario": "polls", "creation_alone_p50_ms": round(statistics.median(alone), 1),
            "creation_with_32_pollers_p50_ms": round(statistics.median(loaded), 1),
            "creation_with_32_pollers_max_ms": round(max(loaded), 1), "polls_served": done[0]}


def jobs(stack, seconds):
    url = stack.server.url
    hogs = [CallerAt(url, address, TASKS) for address in ("10.38.4.1", "10.38.4.2")]
    long_job = {"name": "slow_job", "arguments": {"steps": int(seconds * 20), "interval_ms": 50}}
    sent = [[hog.post("tools/call", long_job).json["result"]["taskId"] for hog in hogs] for _ in range(3)]
    until(lambda: all(stack.started_at(job) for job in sent[0]))
    victim = SessionAt(url, "10.38.4.3")
    victim.initialize()
    message = victim.message("tools/call", {"name": "slow_job", "arguments": {"steps": 1, "interval_ms": 1}})
    stream = victim.stream("POST", message, timeout=seconds * 10)
    until(lambda: stack.jobs_of_session(victim.session_id))
    freed_at = time.time()
    hogs[0].post("tasks/cancel", {"taskId": sent[0][0]})  # the first hog's first job: a slot comes free
    stream.messages(timeout=seconds * 10)  # until the victim's answer
    short = stack.jobs_of_session(victim.session_id)[0]
    until(lambda: all(stack.started_at(job) for job in sent[1]), deadline=seconds * 10)
    return {"scenario": "jobs", "victim_started_after_slot_free_s": round(stack.started_at(short) - freed_at, 2),
            "hogs_second_jobs_started_after_slot_free_s": [round(stack.started_at(job) - freed_at, 2)
                                                          for job in sent[1]], "hog_job_seconds": seconds}


SCENARIOS = {"threads": (threads, False), "polls": (polls, False), "jobs": (jobs, True)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenarios", nargs="*", metavar="|".join(SCENARIOS), help="all of them by default")
    parser.add_argument("--seconds", type=float, default=8.0, help="length of a hog's call or job")
    args = parser.parse_args()
    if set(args.scenarios) - set(SCENARIOS):
        parser.error(f"scenarios: {', '.join(SCENARIOS)}")
    for name in args.scenarios or SCENARIOS:
        run, with_worker = SCENARIOS[name]
        stack = Stack(worker=with_worker)
        try:
            print(json.dumps(run(stack, args.seconds)), flush=True)
        finally:
            stack.stop()


if __name__ == "__main__":
    main()
