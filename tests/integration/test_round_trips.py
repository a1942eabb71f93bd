"""The Redis cost of a short inline call is a tested number (issue 19): ``tools/call echo``
costs one round trip in the 2025-11-25 era and none in the 2026-07-28 era (once its caller's
count is remembered), so no later change adds one silently.

A daphne process of its own talks to a Redis of its own, which MONITOR watches: every command
a client sends is counted (a command inside a script is the script's, not a round trip; a
pipeline's commands are counted one by one, so the count is an upper bound of the round
trips). Housekeeping runs once an hour here (HEARTBEAT_SECONDS), so nothing but the calls
talks to Redis while they are counted. With authorization on, a static token costs no round
trip either: its check is in process memory between revocations (AUTH_REVOCABLE_MEMORY_SECONDS).
"""
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from mcpserver.embedded_redis import EmbeddedRedis
from mcp_transport.testing import HttpClient, ModernClient

from .redis_monitor import count

ROOT = Path(__file__).resolve().parents[2]
CALLS = 20
ECHO = {"name": "echo", "arguments": {"text": "counted"}}
#: Round trips one call may cost: 2025-11-25, the session's read (its admission rides along);
#: 2026-07-28, none: the warm-up call read the count of the caller's background calls, which the
#: process remembers (CALLER_COUNT_MEMORY_SECONDS, an hour here so a slow machine cannot renew
#: it during the count; the default 1 s costs a busy caller one read a second).
BUDGET = {"2025-11-25": 1, "2026-07-28": 0}
#: The servers' settings (the docstring, BUDGET).
QUIET = {"HEARTBEAT_SECONDS": 3600, "CALLER_COUNT_MEMORY_SECONDS": 3600}


@pytest.fixture(scope="module")
def own_redis():
    server = EmbeddedRedis().start()
    yield server
    server.stop()


@pytest.fixture(scope="module", params=["auth off", "static token"])
def counted(request, start_server, own_redis, server_env):
    """(server, token): a server on the counted Redis, without and with authorization (a
    static token, trusted from process memory between revocations: auth/)."""
    env = {"REDIS_URL": own_redis.url, "MCP_TRANSPORT_JSON": json.dumps(QUIET)}
    token = None
    if request.param == "static token":
        # Trusted for longer than the default 10 s: a loaded machine may take that long for the
        # calls, and one renewal would be counted as theirs.
        settings = {**QUIET, "AUTH_REVOCABLE_MEMORY_SECONDS": 3600}
        env.update(MCP_AUTH="on", MCP_TRANSPORT_JSON=json.dumps(settings))
        created = subprocess.run(
            [sys.executable, "manage.py", "mcp_tokens", "create", "--user", f"counted-{secrets.token_hex(4)}"],
            cwd=ROOT, env={**os.environ, **server_env, **env}, capture_output=True, text=True, timeout=120)
        assert created.returncode == 0, created.stdout + created.stderr
        token = created.stdout.strip().splitlines()[-1]
    server = start_server(**env)
    yield server, token
    server.stop()


def test_a_2025_inline_call_costs_one_round_trip(counted, own_redis):
    server, token = counted
    client = HttpClient(server.url, token=token)
    client.initialize()
    assert client.call("tools/call", ECHO)["result"]["structuredContent"] == {"result": "counted"}  # warm

    def calls():
        for _ in range(CALLS):
            assert client.call("tools/call", ECHO)["result"]["structuredContent"] == {"result": "counted"}

    commands = count(own_redis, calls)
    print("2025-11-25 commands per call:", len(commands) / CALLS)
    assert len(commands) <= CALLS * BUDGET["2025-11-25"], commands


def test_a_busy_callers_2026_inline_call_costs_no_round_trip(counted, own_redis):
    server, token = counted
    client = ModernClient(server.url)
    client.token = token
    assert client.post("tools/call", ECHO).json["result"]["structuredContent"] == {"result": "counted"}  # warm

    def calls():
        for _ in range(CALLS):
            reply = client.post("tools/call", ECHO)
            assert reply.status == 200 and reply.json["result"]["structuredContent"] == {"result": "counted"}

    commands = count(own_redis, calls)
    print("2026-07-28 commands per call:", len(commands) / CALLS)
    assert len(commands) <= CALLS * BUDGET["2026-07-28"], commands


@pytest.fixture(scope="module")
def rated(start_server, own_redis):
    """A server with a rate limit no call here reaches: each tools/call takes its place in its
    caller's window in the script its admission runs anyway (state/rates.py)."""
    settings = {**QUIET, "RATE_LIMIT": "1000000/h"}
    server = start_server(REDIS_URL=own_redis.url, MCP_TRANSPORT_JSON=json.dumps(settings))
    yield server
    server.stop()


def test_a_rate_limited_call_costs_no_round_trip_of_its_own(rated, own_redis):
    """2025-11-25: still the session's read alone (the rate is counted in it); 2026-07-28: one,
    the count of the caller's calls with its place in the window (shared by every process, so
    it cannot be remembered)."""
    legacy, modern = HttpClient(rated.url), ModernClient(rated.url)
    legacy.initialize()
    calls = {"2025-11-25": lambda: legacy.call("tools/call", ECHO),
             "2026-07-28": lambda: modern.post("tools/call", ECHO).json}
    for era, budget in (("2025-11-25", BUDGET["2025-11-25"]), ("2026-07-28", 1)):
        assert calls[era]()["result"]["structuredContent"] == {"result": "counted"}  # warm
        commands = count(own_redis, lambda: [calls[era]() for _ in range(CALLS)])
        print(era, "commands per rate limited call:", len(commands) / CALLS)
        assert len(commands) <= CALLS * budget, commands
