"""Calls in flight when Redis stalls or comes back empty, or the database is unreachable: each
one ends with its own result.

Every test runs a private redis-server (``redis_server``, conftest.py: for the app and the Celery
broker, as in a deployment with one Redis), its own daphne and its own worker, so that pausing or restarting that Redis
touches nothing else of the suite. Load: inline calls with progress, background calls, and a
client sending echoes all along. What was lost is counted, and must be nothing.
"""
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from mcp_transport.testing import HttpClient, LiveWorker

from .load import LegacyCall, ModernCall, ModernTask, worker_gave_up

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAST = {"HEARTBEAT_SECONDS": 0.5, "KEEPALIVE_SECONDS": 1}
#: A deadline for a loaded machine, not a figure the tests measure.
ANSWER_DEADLINE = 120


@pytest.fixture
def deployment(redis_server, server_env, start_server):
    """``deployment(server_settings, database_url, daphnes, concurrency)``: ``daphnes`` daphne
    processes and a worker of ``concurrency`` slots (3) on ``redis_server`` (and the run's
    database, or a migrated ``database_url``); returns (the daphnes, the worker)."""
    started = []

    def start(server_settings=None, database_url=None, daphnes=1, concurrency=3):
        prefix = f"{os.environ['MCP_KEY_PREFIX']}-rf{secrets.token_hex(2)}"
        env = {**server_env, "REDIS_URL": redis_server.url, "MCP_KEY_PREFIX": prefix, "CELERY_QUEUE": prefix,
               "CELERY_BROKER_URL": redis_server.url, "MCP_TRANSPORT_JSON": json.dumps(FAST)}
        if database_url:
            env["DATABASE_URL"] = database_url
            subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT,
                           env={**os.environ, **env}, check=True)
        servers = [start_server(**{**env, "MCP_TRANSPORT_JSON": json.dumps({**FAST, **(server_settings or {})})})
                   for _ in range(daphnes)]
        worker = LiveWorker(queue=prefix, env={**env, "LOG_LEVEL": "INFO"}, cwd=ROOT, concurrency=concurrency).start()
        started.extend((worker, *servers))
        return servers, worker

    yield start
    for process in started:
        process.stop()


class Call:
    """One tools/call with a progress token, read to its end in a thread of its own."""

    def __init__(self, client, name, **arguments):
        self.client, self.name = client, name
        self.message = client.message("tools/call", {"name": name, "arguments": arguments,
                                                     "_meta": {"progressToken": secrets.token_hex(4)}})
        self.progress, self.answers, self.error = [], [], None
        #: How many times the server ended the connection before the answer (the client resumed).
        self.resumed = 0
        #: The id of the event that carried the first progress report: a resume point.
        self.first_progress_id = None
        self.first_progress = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        try:
            stream = self.client.stream("POST", self.message, timeout=ANSWER_DEADLINE)
            self._follow(stream)
            while not self.answers:  # the server ended the connection, not the stream: resume
                assert stream.last_event_id, "the stream ended before its first event"
                self.resumed += 1
                stream = self._resume(stream.last_event_id)
                self._follow(stream)
        except Exception as exc:  # reported by the test
            self.error = exc
        finally:
            self.first_progress.set()

    def _resume(self, last_event_id):
        """GET with Last-Event-ID, again after a 503 (the store is not back yet), as a client would."""
        deadline = time.monotonic() + ANSWER_DEADLINE
        while True:
            stream = self.client.resume(last_event_id, timeout=ANSWER_DEADLINE)
            if stream.status != 503 or time.monotonic() > deadline:
                assert stream.status == 200, (stream.status, stream.response.read())
                return stream
            stream.response.read()
            time.sleep(0.5)

    def _follow(self, stream):
        deadline = time.monotonic() + ANSWER_DEADLINE
        while (event := stream.next_event(timeout=ANSWER_DEADLINE)) is not None:
            assert time.monotonic() < deadline, f"{self.name}: only keep-alives for {ANSWER_DEADLINE} s"
            if not event.data:
                continue
            message = json.loads(event.data)
            if message.get("method") == "notifications/progress":
                self.progress.append(message["params"]["progress"])
                self.first_progress_id = self.first_progress_id or stream.last_event_id
                self.first_progress.set()
            elif message.get("id") == self.message["id"]:
                self.answers.append(message)

    def outcome(self):
        self.thread.join(ANSWER_DEADLINE * 2)
        assert not self.thread.is_alive(), f"{self.name} was never answered"
        if self.error is not None:
            raise self.error
        assert len(self.answers) == 1, self.answers
        return self.answers[0]


class Echoes:
    """A client calling echo every 200 ms on its own session: each must get its answer."""

    def __init__(self, url):
        self.client = HttpClient(url)
        self.client.initialize()
        self.sent, self.failed, self.slowest = 0, [], 0.0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopping.wait(0.2):
            self.sent += 1
            text = f"echo {self.sent}"
            began = time.monotonic()
            try:
                answer = self.client.call("tools/call", {"name": "echo", "arguments": {"text": text}})
                if answer.get("result", {}).get("content", [{}])[0].get("text") != text:
                    self.failed.append(answer)
            except Exception as exc:
                self.failed.append(repr(exc))
            self.slowest = max(self.slowest, time.monotonic() - began)

    def stop(self):
        self.stopping.set()
        self.thread.join(ANSWER_DEADLINE)


def _client(server):
    client = HttpClient(server.url)
    client.initialize()
    return client


def _start_load(servers, inline=3, background=2):
    """Inline and background calls, spread over the daphnes."""
    calls = [Call(_client(servers[i % len(servers)]), "slow_progress", steps=30, interval_ms=300)
             for i in range(inline)]
    calls += [Call(_client(servers[i % len(servers)]), "slow_job", steps=25, interval_ms=600)
              for i in range(inline, inline + background)]
    for call in calls:
        assert call.first_progress.wait(ANSWER_DEADLINE), f"{call.name} reported no progress"
    return calls


def _assert_all_answered_whole(calls, steps=None):
    """Every call: one answer, its own success, and every progress report once, in order (a
    background tool's silent stretches may add heartbeat progress between its own reports)."""
    lost = []
    for call in calls:
        answer = call.outcome()
        expected = steps or (30 if call.name == "slow_progress" else 25)
        own = [value for value in call.progress if value == int(value)]
        if answer.get("result", {}).get("isError") or "error" in answer:
            lost.append((call.name, answer))
        elif own != list(range(1, expected + 1)) or call.progress != sorted(set(call.progress)):
            lost.append((call.name, "progress", call.progress))
    assert lost == []


def test_a_ten_second_redis_stall_costs_no_call(deployment, redis_server):
    servers, _worker = deployment(daphnes=2)
    calls = _start_load(servers)
    echoes = Echoes(servers[-1].url)
    while echoes.sent < 3:
        time.sleep(0.05)
    os.kill(redis_server.process.pid, signal.SIGSTOP)
    paused_at = time.monotonic()
    time.sleep(10)  # the fault itself: a Redis that answers nothing for 10 s
    os.kill(redis_server.process.pid, signal.SIGCONT)
    resumed_at = time.monotonic()
    _assert_all_answered_whole(calls)
    answered_at = time.monotonic()
    echoes.stop()
    print(f"\nstall of {resumed_at - paused_at:.1f} s: {len(calls)} calls answered whole "
          f"{answered_at - resumed_at:.1f} s after; {echoes.sent} echoes, slowest {echoes.slowest:.1f} s")
    assert echoes.failed == []


def test_a_stream_whose_follower_lost_redis_ends_for_a_resume_that_gets_the_result(deployment, redis_server):
    """The daphne gives up on Redis after 1 s (the worker rides out the whole stall): the
    background call's POST stream ends with a retry instead of staying open with keep-alives
    only, and the client's resume gets the rest, result included."""
    servers, _worker = deployment({"REDIS_OUTAGE_TOLERANCE": 1})
    [call] = _start_load(servers, inline=0, background=1)
    os.kill(redis_server.process.pid, signal.SIGSTOP)
    time.sleep(6)  # the fault: longer than the server's tolerance
    os.kill(redis_server.process.pid, signal.SIGCONT)
    _assert_all_answered_whole([call])
    assert call.resumed >= 1


def _restart_empty(redis_server, down_seconds):
    """SIGKILL the Redis and start an empty one on the same port ``down_seconds`` later."""
    redis_server.process.kill()
    redis_server.process.wait()
    redis_server.process = None
    shutil.rmtree(redis_server.dir, ignore_errors=True)
    time.sleep(down_seconds)  # the fault itself: no Redis at all for that long
    redis_server.start()


def test_a_redis_restarted_empty_costs_no_call(deployment, redis_server):
    servers, _worker = deployment(daphnes=2)
    calls = _start_load(servers)
    echoes = Echoes(servers[-1].url)
    while echoes.sent < 3:
        time.sleep(0.05)
    killed_at = time.monotonic()
    _restart_empty(redis_server, 5)
    back_at = time.monotonic()
    _assert_all_answered_whole(calls)
    answered_at = time.monotonic()
    echoes.stop()
    for index, call in enumerate(calls):  # Redis forgot every stream: resumes (on the other
        # daphne) from before the restart replay from the database
        resumer = call.client.on(servers[(index + 1) % len(servers)].url)
        replayed = resumer.resume(call.first_progress_id).messages(timeout=ANSWER_DEADLINE)
        progress = [m["params"]["progress"] for m in replayed if m.get("method") == "notifications/progress"]
        assert progress == call.progress[1:] and replayed[-1] == call.answers[0]
    print(f"\nRedis gone for {back_at - killed_at:.1f} s and back empty: {len(calls)} calls answered whole "
          f"{answered_at - back_at:.1f} s after; {echoes.sent} echoes, slowest {echoes.slowest:.1f} s")
    assert echoes.failed == []


def _pause(redis_server, seconds):
    os.kill(redis_server.process.pid, signal.SIGSTOP)
    time.sleep(seconds)  # the fault itself: a Redis that answers nothing for that long
    os.kill(redis_server.process.pid, signal.SIGCONT)


#: What happens to the Redis that is the broker too, as in a deployment with one Redis.
BROKER_FAULTS = {"restart": lambda redis_server: _restart_empty(redis_server, 3),
                 "pause": lambda redis_server: _pause(redis_server, 10)}


@pytest.mark.parametrize("fault", sorted(BROKER_FAULTS))
def test_the_worker_rides_out_a_broker_loss_and_every_call_in_flight_completes(deployment, redis_server, fault):
    """Both eras in flight across the fault: two inline calls each, a 2025-11-25 background call
    and a 2026-07-28 task. The worker has two slots, so each caller's share is one (every test
    client is one address): one background call runs across the fault, the other waits for its
    place and runs after it, on the same worker, which must still be consuming. It was not after
    a restart: with a slot free (its BRPOP in flight) and a job unacknowledged, kombu's channel
    closed halfway on the lost connection and Celery stopped the worker on the AttributeError of
    the second close ("Unrecoverable error"; connections/broker.py); the waiting call ended with
    "No worker took tool slow_job". A pause breaks no connection: the worker waits it out."""
    [server], worker = deployment(concurrency=2)
    urls = [server.url]
    inline, background = {"steps": 30, "interval_ms": 300}, {"steps": 20, "interval_ms": 600}
    running = LegacyCall(urls, "slow_job", **background).start()
    assert running.first_progress.wait(ANSWER_DEADLINE) and running.error is None, running.error
    waiting = ModernTask(urls, "slow_job", **background)  # the caller's place is taken: it waits
    calls = [LegacyCall(urls, "slow_progress", **inline), LegacyCall(urls, "slow_progress", **inline),
             ModernCall(urls, "slow_progress", **inline), ModernCall(urls, "slow_progress", **inline), waiting]
    for call in calls:
        call.start()
    for call in calls:
        assert call.first_progress.wait(ANSWER_DEADLINE) and call.error is None, (call.name, call.error)
    calls.insert(0, running)
    BROKER_FAULTS[fault](redis_server)
    for call in calls:
        call.join()
    ended = [(call.era, call.kind, call.outcome(), call.notes) for call in calls]
    completed = sum(outcome == "result" for _era, _kind, outcome, _notes in ended)
    print(f"\nbroker {fault}: {completed} of {len(calls)} calls in flight completed")
    assert completed == len(calls), f"{ended}\n{worker_gave_up(worker)}"
    assert worker.process.poll() is None and not worker_gave_up(worker), worker_gave_up(worker) or worker.log()[-3000:]


def test_a_queued_job_whose_broker_message_went_with_redis_is_sent_again(deployment, redis_server):
    """No worker consumes the queue while Redis restarts empty: the job's message and its call
    record are gone, its row says queued. The connection following the call notices and sends
    it again; the next worker runs it once."""
    [server], worker = deployment()
    worker.stop()
    client = _client(server)
    call = Call(client, "slow_job", steps=3, interval_ms=10)
    _wait_for_broker_message(redis_server, worker.queue)
    _restart_empty(redis_server, 1)
    replacement = LiveWorker(queue=worker.queue, env=worker.env, cwd=ROOT).start()
    try:
        _assert_all_answered_whole([call], steps=3)
    finally:
        replacement.stop()


def _wait_for_broker_message(redis_server, queue):
    import redis

    from .waiting import eventually

    client = redis.Redis.from_url(redis_server.url)

    def check():
        assert client.llen(queue) > 0

    try:
        eventually(check, deadline=ANSWER_DEADLINE)
    finally:
        client.close()


def test_twenty_seconds_without_the_database_cost_no_background_call(deployment, tmp_path):
    """The database (a SQLite file of its own here) cannot be opened for 20 s, as an unreachable
    PostgreSQL refuses connections, while background tools report progress: every report and
    every result still reaches its client (before, a report's write of the job's row raised,
    and the job's end could not be written: "The worker running tool slow_job was lost")."""
    database = tmp_path / "db.sqlite3"
    servers, _worker = deployment(database_url=f"sqlite:///{database}")
    calls = _start_load(servers, inline=1, background=2)
    away = tmp_path / "away.sqlite3"
    database.rename(away)
    database.mkdir()  # a directory where the file was: every new connection fails at once
    cut_at = time.monotonic()
    time.sleep(20)  # the fault itself
    database.rmdir()
    away.rename(database)
    back_at = time.monotonic()
    _assert_all_answered_whole(calls)
    print(f"\ndatabase unreachable {back_at - cut_at:.1f} s: {len(calls)} calls answered whole "
          f"{time.monotonic() - back_at:.1f} s after")
