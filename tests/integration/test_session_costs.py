"""A 2025-11-25 session's whole life is a tested cost (issue 32, item 2): ``initialize``,
``notifications/initialized``, one ``tools/call`` and ``DELETE`` of a session that never ran a
background job cost at most ``LIFE_BUDGET`` Redis round trips in all, and no database work on
the request path: the session's row and its calls' records are written behind, in batches, by
the writers' own threads (``state/session_rows.py``, ``running/calls.py``), and reach the
database within moments, the session closed.

Redis: a daphne process of its own on a Redis of its own, counted by MONITOR as in
test_round_trips.py (a pipeline's commands count one by one: an upper bound of the round trips).
The database: the server's queries are watched and held (``mcpserver/db_probe.py``): with the
database held, the lives must all be answered, and no query may come from any thread but the
writers'; released, the rows arrive.
"""
import json
import os
import subprocess
import sys

import pytest

from mcpserver.embedded_redis import EmbeddedRedis
from mcp_transport.testing import HttpClient

from .test_round_trips import QUIET, count

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ECHO = {"name": "echo", "arguments": {"text": "counted"}}
LIVES = 10
#: Round trips of one life (issue 32 allowed 6): initialize (the address quota, its opening rate
#: and the new session's copy in one script), notifications/initialized (the read and the state change in one
#: script), the call (the session's read, its admission riding along), DELETE (the close, whose
#: script checks first that the session is open and the caller's own).
LIFE_BUDGET = 4
#: The threads that write behind the requests (session rows, call records, events).
WRITERS = ("mcp-sessions-db", "mcp-calls-db", "mcp-events-db")


@pytest.fixture(scope="module")
def own_redis():
    server = EmbeddedRedis().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def probed(start_server, own_redis, tmp_path_factory):
    """(server, probe folder): a server on the counted Redis whose queries are watched."""
    folder = tmp_path_factory.mktemp("db-probe")
    # SESSION_OPEN_RATE on (the test run turns it off): its bucket is taken by initialize's script.
    server = start_server(REDIS_URL=own_redis.url, MCP_TRANSPORT_JSON=json.dumps(QUIET), MCP_DB_PROBE=str(folder),
                          MCP_SESSION_OPEN_RATE="1000000/h")
    yield server, folder
    (folder / "hold").unlink(missing_ok=True)
    server.stop()


def live(url) -> str:
    """One whole session life; its session id."""
    client = HttpClient(url)
    client.initialize()
    assert client.call("tools/call", ECHO)["result"]["structuredContent"] == {"result": "counted"}
    assert client.delete().status == 200
    return client.session_id


def test_a_session_life_costs_four_round_trips(probed, own_redis):
    server, _ = probed
    live(server.url)  # warm: the process's first request listens on its control channel
    commands = count(own_redis, lambda: [live(server.url) for _ in range(LIVES)])
    print("Redis commands per session life:", len(commands) / LIVES)
    assert len(commands) <= LIVES * LIFE_BUDGET, "\n".join(commands)


_CLOSED_ROWS = """
import json, time
from mcp_transport.models import McpSession, McpCall
ids = {ids!r}
end = time.monotonic() + 60
while time.monotonic() < end:
    closed = McpSession.objects.filter(pk__in=ids, state="closed").count()
    calls = McpCall.objects.filter(session_id__in=ids, method="tools/call").count()
    if closed == len(ids) and calls == len(ids):
        break
    time.sleep(0.05)
print(json.dumps([closed, calls]))
"""


def test_a_session_life_waits_for_no_database(probed, server_env):
    server, folder = probed
    live(server.url)  # warm
    queries = folder / "queries.log"
    start = queries.stat().st_size if queries.exists() else 0
    (folder / "hold").touch()
    try:
        ids = [live(server.url) for _ in range(3)]  # each request would wait here if it used the database
        lines = queries.read_text()[start:].splitlines() if queries.exists() else []
    finally:
        (folder / "hold").unlink()
    on_the_path = [line for line in lines if not line.startswith(WRITERS)]
    assert not on_the_path, "\n".join(on_the_path)
    code = _CLOSED_ROWS.format(ids=ids)
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, **server_env}, timeout=180)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [len(ids), len(ids)]
