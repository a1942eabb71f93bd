"""A tool's client of the process (issue 32, item 3): the example's ``count_visit``, an async tool
whose Redis client is made once per process by ``@per_process`` (tools/mcp_tools/shared_clients.py,
shown as it is in docs/tools.md), costs its own command per call and nothing more: no connection,
lookup round trip or health check per call or per command, in either era, under a real daphne.

Its Redis is one of the test's own, watched with MONITOR (as the round-trip test watches the
app's); the app itself talks to another, so every command seen here is the tool's."""
import json

import pytest
import redis

from mcpserver.embedded_redis import EmbeddedRedis
from mcp_transport.testing import HttpClient, ModernClient

from .redis_monitor import count

CALLS = 20
QUIET = {"HEARTBEAT_SECONDS": 3600, "CALLER_COUNT_MEMORY_SECONDS": 3600}


@pytest.fixture(scope="module")
def counters_redis():
    server = EmbeddedRedis().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def server(start_server, counters_redis):
    server = start_server(EXAMPLE_COUNTERS_URL=counters_redis.url, MCP_TRANSPORT_JSON=json.dumps(QUIET))
    yield server
    server.stop()


def _visit(call, page) -> int:
    result = call({"name": "count_visit", "arguments": {"page": page}})["result"]
    assert not result.get("isError"), result
    return result["structuredContent"]["result"]


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
def test_a_process_client_costs_the_tools_own_command_and_nothing_more(server, counters_redis, era):
    if era == "2025-11-25":
        client = HttpClient(server.url)
        client.initialize()
        call = lambda params: client.call("tools/call", params)  # noqa: E731
    else:
        modern = ModernClient(server.url)
        call = lambda params: modern.post("tools/call", params).json  # noqa: E731
    page = {"2025-11-25": "home", "2026-07-28": "catalogue"}[era]  # one each: the counts outlive a test
    assert _visit(call, page) == 1  # the process's client may be made here (the other era's test may have)

    commands = count(counters_redis, lambda: [_visit(call, page) for _ in range(CALLS)])
    assert commands == [f"INCRBY example:visits:{page} 1"] * CALLS, commands
    assert _visit(call, page) == CALLS + 2
    # One client of the process, kept: one connection with its name, however many calls.
    named = [c for c in redis.Redis.from_url(counters_redis.url).client_list() if c["name"] == "example-counters"]
    assert len(named) == 1, named


def test_a_page_outside_the_schema_is_refused_before_redis(server, counters_redis):
    """Any caller may count: the schema bounds what it can add to the shared Redis."""
    commands = count(counters_redis, lambda: ModernClient(server.url).post(
        "tools/call", {"name": "count_visit", "arguments": {"page": "x" * 1000}}))
    assert commands == []


def test_without_a_plain_redis_the_tool_says_so(start_server):
    server = start_server(EXAMPLE_COUNTERS_URL="", MCP_TRANSPORT_JSON=json.dumps(QUIET))
    try:
        result = ModernClient(server.url).post("tools/call", {"name": "count_visit", "arguments": {"page": "about"}})
        assert result.json["result"]["isError"] is True
        assert result.json["result"]["content"][0]["text"] == \
            "This example counts in a plain Redis: set EXAMPLE_COUNTERS_URL."
    finally:
        server.stop()
