"""manage.py mcp_sessions against sessions made by real traffic through live daphne processes,
run as an operator would: another process, with the servers' database and Redis."""
import json
import os
import subprocess
import sys
from pathlib import Path

from mcp_transport.testing import HttpClient

ROOT = Path(__file__).resolve().parents[2]
SSE = {"Accept": "text/event-stream"}


def manage(server_env, *args):
    done = subprocess.run([sys.executable, "manage.py", "mcp_sessions", *args], cwd=ROOT,
                          env={**os.environ, **server_env}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def progress_call(client, steps=3):
    """A tool call answered over SSE; returns the id of its last event."""
    message = client.message("tools/call", {"name": "slow_progress", "arguments": {"steps": steps, "interval_ms": 1},
                                            "_meta": {"progressToken": "p"}})
    stream = client.stream("POST", message)
    events = stream.events()
    assert json.loads(events[-1].data)["id"] == message["id"]
    return events[-1].id


def test_list_and_show_a_session_made_through_the_server(mcp_server, server_env):
    client = HttpClient(mcp_server.url)
    client.initialize()
    progress_call(client)
    listed = json.loads(manage(server_env, "list", "--json", "--limit", "1000"))
    mine = [entry for entry in listed if entry["id"] == client.session_id]
    assert len(mine) == 1
    assert mine[0]["state"] == "ready" and mine[0]["client"] == "mcp-transport-tests 0"
    assert client.session_id in manage(server_env, "list", "--limit", "1000")  # the table too

    shown = json.loads(manage(server_env, "show", "--json", "--", client.session_id[:12]))
    assert shown["id"] == client.session_id and shown["protocol_version"] == "2025-11-25"
    assert 0 < shown["live_ttl_seconds"] <= 1800
    (stream,) = shown["streams"]
    # The priming event, three progress notifications and the response, in Redis (the database
    # copy is batched, so it may still be on its way).
    assert stream["store"] == 5 and shown["buffered"]["store"] == 5
    assert "stream" in manage(server_env, "show", "--", client.session_id)


def test_terminate_closes_open_streams_on_every_process_and_then_404(mcp_server, second_server, server_env):
    client = HttpClient(mcp_server.url)
    client.initialize()
    held_here = client.stream("GET", headers=SSE)
    assert held_here.status == 200 and held_here.next_event().id  # the priming event
    running = client.on(second_server.url).stream("POST", client.message(
        "tools/call", {"name": "slow_progress", "arguments": {"steps": 2000, "interval_ms": 50},
                       "_meta": {"progressToken": 1}}))
    assert running.next_event().id  # priming: the tool runs on the second process

    assert manage(server_env, "terminate", "--", client.session_id).strip() == f"{client.session_id}: terminated"

    assert held_here.events(timeout=10) == []  # the GET stream ended without another event
    rest = running.messages(timeout=10)
    # The tool stopped: no response, and the stream ended long before its 2,000 steps (100 s).
    assert all("result" not in m and "error" not in m for m in rest) and len(rest) < 2000
    assert client.request("POST", client.message("ping")).status == 404
    assert client.on(second_server.url).request("POST", client.message("ping")).status == 404
    shown = json.loads(manage(server_env, "show", "--json", "--", client.session_id))
    assert (shown["state"], shown["closed_reason"], shown["live_ttl_seconds"]) == ("closed", "terminated", None)
    assert manage(server_env, "terminate", "--", client.session_id).strip() == f"{client.session_id}: already closed"


def test_purge_drops_buffers_and_keeps_the_session(mcp_server, server_env):
    client = HttpClient(mcp_server.url)
    client.initialize()
    last_id = progress_call(client)
    assert manage(server_env, "purge", "--", client.session_id).strip() == \
        f"{client.session_id}: 5 buffered events dropped"
    shown = json.loads(manage(server_env, "show", "--json", "--", client.session_id))
    assert shown["buffered"] == {"store": 0, "database": 0} and shown["streams"] == []
    resumed = client.request("GET", headers={**SSE, "Last-Event-ID": last_id})
    assert resumed.status == 400  # nothing left to replay, and never 404: the session lives
    assert client.call("ping")["result"] == {}


def test_unknown_session_is_a_command_error(server_env):
    done = subprocess.run([sys.executable, "manage.py", "mcp_sessions", "show", "no-such-session"], cwd=ROOT,
                          env={**os.environ, **server_env}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "No session 'no-such-session'" in done.stderr
