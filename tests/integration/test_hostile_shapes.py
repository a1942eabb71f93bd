"""Issue 20, class 4: what a client sends nests at most MAX_JSON_DEPTH deep and its string ids
are at most MAX_ID_BYTES long, on every endpoint and in both eras; past that the answer is a
clear 400 before anything is stored (no session row, no traceback in the log)."""
import json
import os
import subprocess
import sys

import pytest

from mcp_transport.testing import HttpClient, ModernClient, assert_transport_error
from tests.conftest import ROOT
from tests.integration.test_http_sse import open_session, post, session_of

DEPTH = 64  # MAX_JSON_DEPTH's default


def nested(levels, leaf="x"):
    """``levels`` objects inside one another."""
    value = leaf
    for _ in range(levels):
        value = {"a": value}
    return value


def _initialize(client, client_info, capabilities=None):
    params = {"protocolVersion": "2025-11-25", "capabilities": capabilities or {}, "clientInfo": client_info}
    return client.request("POST", client.message("initialize", params), session=False)


def _session_rows(server_env, client_name) -> int:
    code = f"from mcp_transport.models import McpSession; print(McpSession.objects.filter(client_name={client_name!r}).count())"
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, **server_env}, check=True)
    return int(done.stdout.split()[-1])


def test_a_client_info_nested_500_deep_is_refused_before_its_session_is_stored(mcp_server, server_env):
    """Before: 500 "Internal error." from a RecursionError after the McpSession row was written
    (an orphan 'initializing' row each time) and ~181 KB of traceback in the log."""
    name = "deep-client-info-e81c"
    log_before = len(mcp_server.log())
    reply = _initialize(HttpClient(mcp_server.url), {"name": name, "version": "1", "x": nested(500)})
    assert_transport_error(reply, 400, -32602)
    assert "64 deep" in reply.json["error"]["message"]
    assert "mcp-session-id" not in reply.headers
    assert _session_rows(server_env, name) == 0
    assert "Traceback" not in mcp_server.log()[log_before:]


def test_a_client_info_at_the_depth_bound_is_kept(mcp_server):
    client = HttpClient(mcp_server.url)
    # initialize's message, params and clientInfo are three of the 64 levels.
    reply = _initialize(client, {"name": "at-the-bound", "version": "1", "x": nested(DEPTH - 3)})
    assert reply.status == 200, reply.body
    client.session_id = reply.headers["mcp-session-id"]
    assert client.call("ping")["result"] == {}


@pytest.mark.parametrize("method, params", [
    ("tools/call", {"name": "echo", "arguments": {"text": "x", "deep": nested(DEPTH)}}),
    ("tools/call", {"name": "echo", "arguments": {"text": "x"}, "_meta": nested(DEPTH)}),
    ("resources/subscribe", {"uri": "test://a", "x": [[[[[[[[[[[[[[[[nested(DEPTH)]]]]]]]]]]]]]]]]}),
])
def test_a_request_nesting_too_deep_is_refused_in_a_session(session, method, params):
    assert_transport_error(session.request("POST", session.message(method, params)), 400, -32602)
    assert session.call("ping")["result"] == {}


def test_an_answer_to_the_server_nesting_too_deep_is_refused(session):
    reply = session.request("POST", {"jsonrpc": "2.0", "id": 7, "result": {"action": "accept", "content": nested(DEPTH)}})
    assert_transport_error(reply, 400, -32602)


@pytest.mark.parametrize("make", [
    lambda id_: {"jsonrpc": "2.0", "id": id_, "method": "ping"},
    lambda id_: {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                 "params": {"name": "echo", "arguments": {"text": "x"}, "_meta": {"progressToken": id_}}},
    lambda id_: {"jsonrpc": "2.0", "id": id_, "result": {}},
])
def test_a_string_id_or_progress_token_over_256_bytes_is_refused(session, make):
    assert_transport_error(session.request("POST", make("x" * 257)), 400, -32600)
    reply = session.request("POST", make("é" * 128))  # 256 bytes: kept
    assert reply.status in (200, 202), reply.body


def test_a_2026_request_with_deep_meta_is_refused(mcp_server):
    client = ModernClient(mcp_server.url)
    reply = client.post("tools/call", {"name": "echo", "arguments": {"text": "x"},
                                       "_meta": {"io.modelcontextprotocol/clientInfo": {"name": "n", "x": nested(DEPTH)}}})
    assert_transport_error(reply, 400, -32602)
    assert client.post("tools/call", {"name": "echo", "arguments": {"text": "x"}}).json["result"]


def test_http_sse_refuses_a_deep_initialize_and_keeps_the_session(mcp_server):
    stream, path = open_session(mcp_server)
    try:
        deep = {"jsonrpc": "2.0", "id": 9, "method": "ping", "params": {"_meta": nested(DEPTH)}}
        status, body, _ = post(mcp_server, path, deep)
        assert status == 400 and json.loads(body)["error"]["code"] == -32602, body
        assert post(mcp_server, path, {"jsonrpc": "2.0", "id": 10, "method": "ping"})[0] == 202
        reply, _ = stream.message()
        assert reply == {"jsonrpc": "2.0", "id": 10, "result": {}}, session_of(path)
    finally:
        stream.close()


@pytest.mark.parametrize("meta_key", ["io.modelcontextprotocol/clientInfo", "io.modelcontextprotocol/clientCapabilities"])
def test_a_2026_request_keeps_client_info_and_capabilities_within_the_sessions_bound(mcp_server, meta_key):
    """MAX_CLIENT_INFO_BYTES (64 KiB) bounds what the legacy initialize keeps; a 2026-07-28
    request sends both with every call, and a background call keeps them in its job's row."""
    client = ModernClient(mcp_server.url)
    big = {"name": "n", "x": "y" * 70_000}
    reply = client.post("tools/call", {"name": "slow_job", "arguments": {"steps": 1, "interval_ms": 1},
                                       "_meta": {meta_key: big}}, request_id="big-1")
    assert reply.status == 400, reply.body
    assert reply.json["id"] == "big-1" and reply.json["error"]["code"] == -32602
    assert "at most 65536" in reply.json["error"]["message"]
