"""One caller's database time cannot stall everyone (issue 30, class 1), against a real daphne
and the run's database (PostgreSQL on CI):

- a statement past STATEMENT_TIMEOUT_SECONDS is stopped by the database, and the call gets one
  sentence saying so, in both eras (before: it ran as long as it liked);
- a 2026-07-28 client that closes its response cancels its running query ("disconnect = cancel";
  before: the query ran on after its client left);
- one account's slow sync calls take only its share of the tool threads, so another user's
  sync call runs while they do (before: a 2026-07-28 call was nobody's, and eight of them took
  every thread);
- a search with more words than SEARCH_MAX_TERMS is refused before any query is built
  (tests/toolsets/test_search_bound.py).
"""
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcp_transport.testing import HttpClient, ModernClient

ROOT = Path(__file__).resolve().parents[2]
POSTGRESQL = os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://"))


@pytest.fixture(scope="module")
def bounded_server(start_server):
    return start_server(MCP_TRANSPORT_JSON=json.dumps({"STATEMENT_TIMEOUT_SECONDS": 1, "KEEPALIVE_SECONDS": 0.5}))


@pytest.fixture(scope="module")
def unbounded_server(start_server):
    return start_server(MCP_AUTH="on", MCP_TRANSPORT_JSON=json.dumps({"STATEMENT_TIMEOUT_SECONDS": None,
                                                                       "KEEPALIVE_SECONDS": 0.5}))


def token_of(server_env, user) -> str:
    done = subprocess.run([sys.executable, "manage.py", "mcp_tokens", "create", "--user", user], cwd=ROOT,
                          env={**os.environ, **server_env}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip().splitlines()[-1]


def modern_client(server, token=None) -> ModernClient:
    client = ModernClient(server.url)
    client.token = token
    return client


def test_a_statement_past_the_bound_is_stopped_with_one_sentence_in_both_eras(bounded_server):
    session = HttpClient(bounded_server.url)
    session.initialize()
    legacy = session.call("tools/call", {"name": "slow_query", "arguments": {"seconds": 60}})
    modern = modern_client(bounded_server).post("tools/call", {"name": "slow_query", "arguments": {"seconds": 60}})
    for result in (legacy["result"], answer_of(modern)["result"]):
        assert result["isError"] is True
        assert result["content"][0]["text"] == ("Tool slow_query: A database query ran longer than this server's "
                                                 "limit of 1 s and was stopped.")
    assert "Traceback" not in bounded_server.log()


def _running_sleeps(seconds) -> int:
    import psycopg

    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as connection:
        return connection.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE %s AND state = 'active'",
                                  [f"SELECT pg_sleep({seconds})"]).fetchone()[0]


@pytest.mark.skipif(not POSTGRESQL, reason="pg_stat_activity shows the running query (CI runs PostgreSQL)")
def test_a_modern_client_that_leaves_cancels_its_query(unbounded_server, server_env):
    client = modern_client(unbounded_server, token_of(server_env, "dbtime-leaver"))
    seconds = round(random.uniform(90, 99), 3)  # its own statement text: no other run's query counts
    stream = client.open("tools/call", {"name": "slow_query", "arguments": {"seconds": seconds}})
    _wait_for(lambda: _running_sleeps(seconds) == 1, "the query to run")
    stream.close()
    _wait_for(lambda: _running_sleeps(seconds) == 0, "the query to be cancelled")  # before: it ran its 90+ s


@pytest.mark.skipif(not POSTGRESQL, reason="pg_stat_activity shows the running queries (CI runs PostgreSQL)")
def test_one_accounts_slow_calls_leave_threads_for_another_user(unbounded_server, server_env):
    attacker = token_of(server_env, "dbtime-attacker")
    victim = modern_client(unbounded_server, token_of(server_env, "dbtime-victim"))
    # As many slow calls as the process has tool threads (SYNC_TOOL_THREADS): before, each
    # 2026-07-28 call was nobody's, so they took every thread for 20 s.
    seconds = round(random.uniform(20, 29), 3)
    streams = [modern_client(unbounded_server, attacker).open(
        "tools/call", {"name": "slow_query", "arguments": {"seconds": seconds}}) for _ in range(8)]
    try:
        _wait_for(lambda: _running_sleeps(seconds) >= 2, "the attacker's queries to run")
        reply = victim.post("tools/call", {"name": "whoami", "arguments": {}}, timeout=120)
        assert answer_of(reply)["result"]["content"][0]["text"] == "dbtime-victim"
        assert _running_sleeps(seconds) >= 1, "the victim's call waited until the attacker's queries ended"
    finally:
        for stream in streams:
            stream.close()  # disconnect = cancel: their queries stop
    _wait_for(lambda: _running_sleeps(seconds) == 0, "the attacker's queries to be cancelled")


def answer_of(reply) -> dict:
    """The answer of a 2026-07-28 reply: its JSON, or the last message of its SSE stream (a call
    of sync code turns its reply into SSE at its first keep-alive)."""
    if reply.content_type != "text/event-stream":
        return reply.json
    lines = reply.body.decode().splitlines()
    return json.loads([line[len("data: "):] for line in lines if line.startswith("data: ")][-1])


def _wait_for(condition, what, deadline=30.0):
    end = time.monotonic() + deadline
    while not condition():
        assert time.monotonic() < end, f"waited {deadline:g} s for {what}"
        time.sleep(0.1)
