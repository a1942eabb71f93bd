"""A tool's client of the process (issue 32, item 3): the example's ``count_visit``, an async tool
whose Redis client is made once per process by ``@per_process`` (tools/mcp_tools/shared_clients.py,
shown as it is in docs/tools.md), costs its own command per call and nothing more: no connection,
lookup round trip or health check per call or per command, in either era, under a real daphne.

Its Redis is one of the test's own, watched with MONITOR (as the round-trip test watches the
app's); the app itself talks to another, so every command seen here is the tool's.

Issue 38: its pool was redis-py's plain asyncio one, which makes a connection for every command
that finds none free and keeps it, idle, for the life of the process: 40 calls at once opened 40
connections and left them open (and past 100 at once, calls failed with MaxConnectionsError).
Now it is a BlockingConnectionPool of at most ``shared_clients.MAX_CONNECTIONS``: a call past
them waits for a free one. Counted with CLIENT LIST on the tool's Redis."""
import asyncio
import json
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis

from mcpserver.embedded_redis import EmbeddedRedis
from mcp_transport.testing import HttpClient, ModernClient

from .redis_monitor import count
from .waiting import eventually

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


AT_ONCE = 40


def _named_connections(counters_redis) -> int:
    clients = redis.Redis.from_url(counters_redis.url).client_list()
    return sum(1 for client in clients if client["name"] == "example-counters")


def test_calls_at_once_on_one_loop_open_no_more_connections_than_the_bound(counters_redis, settings):
    """Calls at once on one event loop, as a web process runs them: every one asks the pool for a
    connection before any gives its back (before: 40 calls, 40 connections, all left open)."""
    from tools.mcp_tools import shared_clients

    settings.EXAMPLE_COUNTERS_URL = counters_redis.url
    before = _named_connections(counters_redis)

    async def at_once():
        shared_clients.counters.forget()  # this loop's own client, of the test's Redis
        counts = await asyncio.gather(*(shared_clients.count_visit("about") for _ in range(AT_ONCE)))
        opened = _named_connections(counters_redis) - before  # while the client and its pool live
        for client in shared_clients.counters.made():
            await client.aclose()
        shared_clients.counters.forget()
        return counts, opened

    counts, opened = asyncio.run(at_once())
    assert sorted(counts) == list(range(min(counts), min(counts) + AT_ONCE))  # each call counted once
    assert 1 <= opened <= shared_clients.MAX_CONNECTIONS, opened

    def closed():  # gone from the Redis too, before another test counts the server's
        assert _named_connections(counters_redis) == before
    eventually(closed)


def test_calls_at_once_through_daphne_open_no_more_connections_than_the_bound(server, counters_redis):
    from tools.mcp_tools import shared_clients

    def visit(_):
        return _visit(lambda params: ModernClient(server.url).post("tools/call", params).json, "about")

    with ThreadPoolExecutor(AT_ONCE) as threads:
        counts = list(threads.map(visit, range(AT_ONCE)))
    assert len(set(counts)) == AT_ONCE
    opened = _named_connections(counters_redis)
    assert 1 <= opened <= shared_clients.MAX_CONNECTIONS, opened


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
