"""Limits the application enforces (state/quotas.py, methods/dispatch.py, transports/), over real daphne.

One server with small limits; each test fails without its limit (the request would be accepted).
Every refusal is counted in the shared metrics hash (``limit_refusals:<limit>``).
"""
import itertools
import json
from concurrent.futures import ThreadPoolExecutor
import os
import time

import pytest
import redis

from mcp_transport.testing import HttpClient

DEADLINE = 60
LIMITS = {"MAX_SESSIONS_PER_ADDRESS": 3, "TRUSTED_PROXIES": ["127.0.0.1"], "MAX_CLIENT_INFO_BYTES": 4096,
          "MAX_SUBSCRIPTIONS_PER_SESSION": 5, "MAX_URI_BYTES": 200, "MAX_CALLS_PER_SESSION": 2,
          "TOOL_MAX_SECONDS": 1, "MAX_EVENT_BYTES": 64 * 1024, "SESSION_MAX_BYTES": 300_000,
          "HEARTBEAT_SECONDS": 0.5}
SSE_FIRST = {"Accept": "text/event-stream, application/json"}
_addresses = (f"198.51.100.{n}" for n in itertools.count(1))


@pytest.fixture(scope="module")
def limited_server(start_server):
    server = start_server(MCP_TRANSPORT_JSON=json.dumps(LIMITS))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def store():
    return redis.Redis.from_url(os.environ["REDIS_URL"], decode_responses=True)


def prefix():
    return os.environ["MCP_KEY_PREFIX"]


class Client(HttpClient):
    """A client behind the trusted proxy (127.0.0.1), at an address of its own."""

    def __init__(self, url, address=None):
        super().__init__(url)
        self.address = address or next(_addresses)

    def headers(self, extra=None, session=True):
        return super().headers({"X-Forwarded-For": self.address, **(extra or {})}, session)


@pytest.fixture
def session(limited_server):
    client = Client(limited_server.url)
    client.initialize()
    return client


def refusals(store, limit):
    return int(store.hget(f"{prefix()}:metrics", f"limit_refusals:{limit}") or 0)


def wait_until(condition, what):
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def init_params(**client_info):
    return {"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "limits", "version": "0", **client_info}}


# -- sessions per client address -------------------------------------------------------------

def test_sessions_per_address_are_capped_with_429_and_retry_after(limited_server, store):
    before = refusals(store, "sessions_per_address")
    clients = [Client(limited_server.url, "203.0.113.10") for _ in range(4)]
    for client in clients[:3]:
        client.initialize()
    reply = clients[3].request("POST", clients[3].message("initialize", init_params()), session=False)
    assert reply.status == 429, reply.body
    assert 1 <= int(reply.headers["retry-after"]) <= 1800 + 60
    assert "mcp-session-id" not in reply.headers
    assert "sessions" in reply.json["error"]["message"]
    # Another address is not affected, and a DELETE frees a place at once.
    Client(limited_server.url, "203.0.113.11").initialize()
    assert clients[0].delete().status == 200
    clients[3].initialize()
    wait_until(lambda: refusals(store, "sessions_per_address") > before, "the refusal was not counted")


def test_sessions_asked_for_at_once_do_not_pass_the_cap(limited_server):
    """20 initialize at once from one address: the ones still being created count too."""
    clients = [Client(limited_server.url, "203.0.113.30") for _ in range(20)]

    def ask(client):
        return client.request("POST", client.message("initialize", init_params()), session=False).status

    with ThreadPoolExecutor(20) as pool:
        statuses = list(pool.map(ask, clients))
    assert sorted(statuses) == [200] * 3 + [429] * 17, statuses


def test_a_forwarded_for_from_an_untrusted_peer_is_ignored(start_server):
    """The same header through a server that trusts no proxy: all sessions are 127.0.0.1's."""
    # A key prefix of its own: the run's other sessions from 127.0.0.1 do not count here.
    server = start_server(MCP_TRANSPORT_JSON=json.dumps({"MAX_SESSIONS_PER_ADDRESS": 2}),
                          MCP_KEY_PREFIX=f"{prefix()}untrusted")
    try:
        Client(server.url, "203.0.113.20").initialize()
        Client(server.url, "203.0.113.21").initialize()
        third = Client(server.url, "203.0.113.22")
        reply = third.request("POST", third.message("initialize", init_params()), session=False)
        assert reply.status == 429, reply.body
    finally:
        server.stop()


# -- what a session stores -------------------------------------------------------------------

def test_oversized_client_info_is_refused_with_32602_and_no_session(limited_server, store):
    client = Client(limited_server.url)
    params = init_params()
    params["capabilities"] = {"experimental": {"blob": "x" * 5000}}
    reply = client.request("POST", client.message("initialize", params), session=False)
    assert reply.status == 200, reply.body
    assert reply.json["error"]["code"] == -32602 and "4096" in reply.json["error"]["message"]
    assert "mcp-session-id" not in reply.headers
    client.initialize(capabilities={"experimental": {"blob": "x" * 1000}})  # under it: fine


def test_subscriptions_per_session_are_capped(session):
    for n in range(5):
        assert "result" in session.call("resources/subscribe", {"uri": f"test://template/any{n}/data"})
    assert "result" in session.call("resources/subscribe", {"uri": "test://template/any0/data"})  # again: no new one
    refused = session.call("resources/subscribe", {"uri": "test://template/any5/data"})
    assert refused["error"]["code"] == -32602 and "5 subscriptions" in refused["error"]["message"]
    session.call("resources/unsubscribe", {"uri": "test://template/any0/data"})
    assert "result" in session.call("resources/subscribe", {"uri": "test://template/any5/data"})


def test_a_long_uri_is_refused(session):
    refused = session.call("resources/subscribe", {"uri": "test://template/" + "u" * 300 + "/data"})
    assert refused["error"]["code"] == -32602 and "200 bytes" in refused["error"]["message"]


def test_delete_drops_the_sessions_subscriptions_everywhere(session, store):
    uris = [f"test://template/deleted{n}/data" for n in range(3)]
    for uri in uris:
        session.call("resources/subscribe", {"uri": uri})
    from mcp_transport.connections import Keys

    names = Keys(prefix())
    assert all(store.sismember(names.uri_subscribers(uri), session.session_id) for uri in uris)
    assert session.delete().status == 200
    assert not store.exists(names.subscriptions(session.session_id))
    assert not any(store.sismember(names.uri_subscribers(uri), session.session_id) for uri in uris)


def test_an_oversized_sse_event_becomes_an_error_result_and_is_not_stored(session, store):
    text = "e" * (100 * 1024)
    reply = session.call("tools/call", {"name": "echo", "arguments": {"text": text}}, headers=SSE_FIRST)
    result = reply["result"]
    assert result["isError"] is True and "65536 bytes" in result["content"][0]["text"]
    assert session.call("tools/call", {"name": "echo", "arguments": {"text": "small"}},
                        headers=SSE_FIRST)["result"]["content"][0]["text"] == "small"
    stored = 0
    for key in store.scan_iter(match=f"{prefix()}:stream:{session.session_id}:*"):
        stored += sum(len(fields.get("m", "")) for _, fields in store.xrange(key))
    assert 0 < stored < 64 * 1024
    # A JSON reply is not stored: it is not limited by MAX_EVENT_BYTES.
    assert session.call("tools/call", {"name": "echo", "arguments": {"text": text}},
                        headers={"Accept": "application/json"})["result"]["content"][0]["text"] == text


def stored_bytes(store, session_id):
    return sum(len(fields.get("m", "").encode()) for key in store.scan_iter(match=f"{prefix()}:stream:{session_id}:*")
               for _, fields in store.xrange(key))


def test_a_session_keeps_at_most_session_max_bytes_in_redis(session, store):
    """Ten echoes of about 50 KB each over SSE: the session's oldest go past 300,000 bytes."""
    for n in range(10):
        reply = session.call("tools/call", {"name": "echo", "arguments": {"text": str(n) * 25_000}}, headers=SSE_FIRST)
        assert reply["result"]["content"][0]["text"] == str(n) * 25_000
    assert 200_000 < stored_bytes(store, session.session_id) <= 300_000


# -- running requests ------------------------------------------------------------------------

def test_inline_tool_run_time_is_capped(session, store):
    before = refusals(store, "tool_seconds")
    started = time.monotonic()
    reply = session.call("tools/call", {"name": "slow_progress",
                                        "arguments": {"steps": 100_000, "interval_ms": 10_000}})
    assert reply["result"]["isError"] is True
    assert "limit of 1 s" in reply["result"]["content"][0]["text"]
    assert time.monotonic() - started < DEADLINE
    wait_until(lambda: refusals(store, "tool_seconds") > before, "the stop was not counted")


def test_a_sync_tool_waiting_past_the_limit_is_answered(session):
    """client_roots waits for an answer the client never sends (CLIENT_REQUEST_TIMEOUT: 300 s)."""
    session.initialize(capabilities={"roots": {}})
    reply = session.call("tools/call", {"name": "client_roots", "arguments": {}})
    assert reply["result"]["isError"] is True and "limit of 1 s" in reply["result"]["content"][0]["text"]


def test_calls_per_session_are_capped_with_429(start_server, store):
    """Two calls stay running (their tool sleeps for ever); the third is refused until one ends."""
    before = refusals(store, "calls_per_session")
    server = start_server(MCP_TRANSPORT_JSON=json.dumps({"MAX_CALLS_PER_SESSION": 2}))
    client = HttpClient(server.url)
    client.initialize()
    forever = {"name": "slow_progress", "arguments": {"steps": 100_000, "interval_ms": 10_000}}
    calls = [client.message("tools/call", forever) for _ in range(2)]
    running = [client.stream("POST", message) for message in calls]
    try:
        message = client.message("tools/call", {"name": "echo", "arguments": {"text": "third"}})
        reply = client.request("POST", message)
        assert reply.status == 429, reply.body
        assert reply.headers["retry-after"] == "1"
        assert reply.json["id"] == message["id"] and "2 requests" in reply.json["error"]["message"]
        other = HttpClient(server.url)  # another session is not affected
        other.initialize()
        assert other.call("tools/call", {"name": "echo", "arguments": {"text": "x"}})["result"]
        for call in calls:
            cancel = client.message("notifications/cancelled", {"requestId": call["id"]}, request_id=False)
            assert client.request("POST", cancel).status == 202
        deadline = time.monotonic() + DEADLINE
        while (reply := client.request("POST", client.message("tools/call", message["params"]))).status == 429:
            assert time.monotonic() < deadline, "the cancelled calls still count"
            time.sleep(0.1)
        assert reply.json["result"]["content"][0]["text"] == "third"
        wait_until(lambda: refusals(store, "calls_per_session") > before, "the refusal was not counted")
    finally:
        for stream in running:
            stream.connection.close()
        server.stop()
