"""One caller's task polls do not hold up another caller's task creation (issue 38, class 8).

Before, ``tasks/get`` read its job's row on Channels' one thread-sensitive thread
(database_sync_to_async), the thread that also writes every job's row: one user's 32 polling
connections made another user's task creation take 146 ms instead of 13. Now a client's reads
of its tasks (tasks/get, tasks/list) run in its caller's share of the handler threads
(methods/threads.py), and job rows are written on a thread no poll waits on.

On a real daphne and PostgreSQL: the test locks the jobs table, so the hog's polls wait in the
database for as long as the test says; meanwhile the victim's task creations, in both eras,
must reach the database (their INSERTs wait on the same lock, beside the polls, instead of in
line behind them in the web process). Then the lock goes and everyone is answered. Conditions
in pg_stat_activity, not timings.
"""
import concurrent.futures
import json
import os
import time

import pytest

from .addresses import ClientAt, ModernClientAt

POSTGRESQL = os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://"))
pytestmark = pytest.mark.skipif(not POSTGRESQL, reason="pg_stat_activity shows who waits for the lock (CI runs PostgreSQL)")

#: How long a condition may take on a loaded machine, not a measured figure.
DEADLINE = 60.0
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
LONG = {"name": "slow_job", "arguments": {"steps": 2400, "interval_ms": 50}}
#: The hog's polling connections, each with a tasks/get in flight.
POLLS = 12


@pytest.fixture(scope="module")
def server(start_server, own_queue):
    """Callers told apart by their address; no worker takes the jobs (they stay queued on the
    module's own queue: on the run's, the shared one-slot worker would run their 2 minutes each
    and hold up every later job test of the run)."""
    return start_server(CELERY_QUEUE=own_queue,
                        MCP_TRANSPORT_JSON=json.dumps({"TRUSTED_PROXIES": ["127.0.0.1"],
                                                       "STATEMENT_TIMEOUT_SECONDS": DEADLINE}))


class JobsTableLock:
    """The test's own connection to the servers' database, holding the jobs table's lock."""

    def __init__(self, url):
        import psycopg

        self.database = url.rsplit("/", 1)[1].split("?")[0]
        self.connection = psycopg.connect(url, autocommit=True)
        self.watcher = psycopg.connect(url, autocommit=True)

    def __enter__(self):
        self.connection.execute("BEGIN")
        self.connection.execute("LOCK TABLE mcp_transport_mcpjob IN ACCESS EXCLUSIVE MODE")
        return self

    def __exit__(self, *exc_info):
        self.connection.execute("COMMIT")
        self.connection.close()
        self.watcher.close()

    def waiting(self, statement: str) -> int:
        """How many of the servers' statements starting with ``statement`` wait for the lock."""
        return self.watcher.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock' "
            "AND query LIKE %s", [self.database, f"{statement}%mcp_transport_mcpjob%"]).fetchone()[0]


def wait_for(condition, what):
    end = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < end, f"waited {DEADLINE:g} s for {what}"
        time.sleep(0.05)


def create_task(server, era):
    """A new caller's task creation, in ``era``: its reply's CreateTaskResult."""
    if era == "2025-11-25":
        legacy = ClientAt(server.url, "10.38.8.2")
        legacy.initialize()
        return lambda: legacy.call("tools/call", {**LONG, "task": {"ttl": 60_000}})["result"]["task"]
    modern = ModernClientAt(server.url, "10.38.8.3", TASKS)
    return lambda: modern.post("tools/call", LONG, timeout=DEADLINE).json["result"]


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
def test_a_callers_task_creation_does_not_wait_behind_another_callers_polls(server, server_env, era):
    hog = ModernClientAt(server.url, "10.38.8.1", TASKS)
    polled = hog.post("tools/call", LONG).json["result"]
    assert polled["resultType"] == "task", polled
    create = create_task(server, era)
    pool = concurrent.futures.ThreadPoolExecutor(POLLS + 1)
    with JobsTableLock(server_env["DATABASE_URL"]) as lock:
        polls = [pool.submit(hog.post, "tasks/get", {"taskId": polled["taskId"]}, timeout=DEADLINE)
                 for _ in range(POLLS)]
        wait_for(lambda: lock.waiting("SELECT") >= 1, "the hog's polls to read")
        creation = pool.submit(create)
        # The victim's row is written while the hog's polls still wait: before, its INSERT waited
        # in the web process, behind the poll that held the one thread.
        wait_for(lambda: lock.waiting("INSERT") == 1, "the victim's task row to be written")
        assert lock.waiting("SELECT") >= 1 and not any(poll.done() for poll in polls)
    task = creation.result(timeout=DEADLINE)
    assert task["status"] == "working" and task["taskId"] != polled["taskId"], task
    for poll in polls:
        reply = poll.result(timeout=DEADLINE)
        assert reply.status == 200 and reply.json["result"]["taskId"] == polled["taskId"], reply.body
    pool.shutdown()
