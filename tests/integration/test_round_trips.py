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


def limited_server(start_server, own_redis, rate):
    """A server whose callers have a REQUEST_RATE_LIMIT of ``rate`` (keys of its own: another
    server's bucket of the same caller is not this one's)."""
    settings = {**QUIET, "REQUEST_RATE_LIMIT": rate}
    return start_server(REDIS_URL=own_redis.url, MCP_KEY_PREFIX=f"mcpreq{secrets.token_hex(3)}",
                        MCP_TRANSPORT_JSON=json.dumps(settings))


def test_a_busy_callers_requests_take_their_tokens_from_memory(start_server, own_redis):
    """REQUEST_RATE_LIMIT (state/request_rates.py): a process takes a caller's tokens several at
    a time, twice as many each time they ran out while fresh, and hands them out from memory
    (CALLER_COUNT_MEMORY_SECONDS, an hour here). After 64 requests it holds 64 more: the next 20
    cost what they cost without the limit."""
    server = limited_server(start_server, own_redis, "1000000/h")
    legacy, modern = HttpClient(server.url), ModernClient(server.url)
    legacy.initialize()
    calls = {"2025-11-25": lambda: legacy.call("tools/call", ECHO),
             "2026-07-28": lambda: modern.post("tools/call", ECHO).json}
    for era, budget in BUDGET.items():
        for _ in range(64):  # warm: 1 + 2 + 4 + 8 + 16 + 32 tokens, then 64 more at the 64th
            assert calls[era]()["result"]["structuredContent"] == {"result": "counted"}
        commands = count(own_redis, lambda: [calls[era]() for _ in range(CALLS)])
        print(era, "commands per call with a request rate:", len(commands) / CALLS)
        assert len(commands) <= CALLS * budget, commands


def test_a_caller_at_its_request_rate_is_refused_from_memory(start_server, own_redis):
    """A refusal is remembered until the caller's next token is back: a client hammering at its
    limit costs Redis nothing more (2025-11-25: the session's read, before the pipeline)."""
    server = limited_server(start_server, own_redis, "2/h")
    legacy, modern = HttpClient(server.url), ModernClient(server.url)
    legacy.initialize()  # not a request of the budget
    assert [modern.post("tools/list").status for _ in range(3)] == [200, 200, 429]
    calls = {"2025-11-25": lambda: legacy.request("POST", legacy.message("tools/call", ECHO)),
             "2026-07-28": lambda: modern.post("tools/call", ECHO)}
    for era, budget in BUDGET.items():
        commands = count(own_redis, lambda: [calls[era]() for _ in range(CALLS)])
        assert calls[era]().status == 429
        print(era, "commands per refused request:", len(commands) / CALLS)
        assert len(commands) <= CALLS * budget, commands
