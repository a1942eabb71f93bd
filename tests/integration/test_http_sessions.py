"""Sessions, DELETE and the protocol version over raw HTTP (checklist F, G, H, K3, §3.2).

Idle expiry runs on its own daphne started with MCP_SESSION_IDLE_TIMEOUT=1 (an env var of the
example project's settings), so no test reaches into Redis or the database.
"""
import json
import re
import secrets
import time

import pytest

from mcp_transport.testing import HttpClient, assert_transport_error

JSON = "application/json"
TIMEOUT = 10
VISIBLE_ASCII = re.compile(r"^[\x21-\x7E]+$")
MODERN_ERROR_CODES = {-32020, -32021, -32022}


def init_params(version="2025-11-25"):
    return {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}


def send(client, method, kind="request", headers=None):
    """One request of each shape the endpoint serves; GET is only used where it is rejected."""
    if method == "GET":
        return client.request("GET", None, headers, timeout=TIMEOUT)
    if method == "DELETE":
        return client.request("DELETE", None, headers, timeout=TIMEOUT)
    if kind == "notification":
        return client.request("POST", client.message("notifications/initialized", request_id=False), headers,
                              timeout=TIMEOUT)
    if kind == "response":
        return client.request("POST", {"jsonrpc": "2.0", "id": "s1", "result": {}}, headers, timeout=TIMEOUT)
    return client.request("POST", client.message("tools/list"), headers, timeout=TIMEOUT)


def tools_list_status(client, headers=None):
    return client.request("POST", client.message("tools/list"), headers, timeout=TIMEOUT).status


REQUESTS = [("POST", "request"), ("POST", "notification"), ("POST", "response"), ("GET", None), ("DELETE", None)]
REQUEST_IDS = ["post-request", "post-notification", "post-response", "get", "delete"]


# --- F1 / F2 / F3: the session id ------------------------------------------------------------------

# F1 / F3 / F2: initialize returns Mcp-Session-Id of visible ASCII, >= 128 bits (22+ chars).
def test_initialize_returns_visible_ascii_session_id(client):
    reply = client.initialize()
    session_id = reply.headers["mcp-session-id"]
    assert VISIBLE_ASCII.match(session_id), session_id
    assert len(session_id) >= 22


# F2: session ids are unique.
def test_fifty_initializes_give_fifty_distinct_session_ids(mcp_server):
    ids = {HttpClient(mcp_server.url).initialize(initialized=False).headers["mcp-session-id"] for _ in range(50)}
    assert len(ids) == 50


# --- F4 / F5 / C6 / G2: missing and unknown sessions -------------------------------------------------

# F4 / C6 / G2: no Mcp-Session-Id (other than initialize) -> 400.
@pytest.mark.parametrize("method, kind", REQUESTS, ids=REQUEST_IDS)
def test_missing_session_id_is_400(client, method, kind):
    assert_transport_error(send(client, method, kind), 400)


# F5 / C6 / G2: an id the server never issued -> 404, whether well-formed or garbage.
@pytest.mark.parametrize("method, kind", REQUESTS, ids=REQUEST_IDS)
@pytest.mark.parametrize("session_id", [
    secrets.token_urlsafe(24),
    "garbage",
    "!!!",
    "x" * 300,
    "../../etc/passwd",
    "a b c",
], ids=["well-formed", "word", "punctuation", "long", "path", "spaces"])
def test_unknown_session_id_is_404(client, method, kind, session_id):
    reply = send(client, method, kind, {"Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-11-25"})
    assert_transport_error(reply, 404)


# G1 / F5: DELETE -> 200; afterwards every request with that id -> 404.
@pytest.mark.parametrize("method, kind", REQUESTS, ids=REQUEST_IDS)
def test_deleted_session_is_404_afterwards(session, method, kind):
    assert session.delete().status == 200
    assert_transport_error(send(session, method, kind), 404)


@pytest.fixture(scope="module")
def one_second_server(start_server):
    server = start_server(MCP_SESSION_IDLE_TIMEOUT="1")
    yield server
    server.stop()


# F5: a session idle for longer than SESSION_IDLE_TIMEOUT is gone: 404 on POST, GET and DELETE.
def test_idle_expired_session_is_404_on_every_method(one_second_server):
    clients = {method: HttpClient(one_second_server.url) for method in ("POST", "GET", "DELETE")}
    for client in clients.values():
        client.initialize()
        assert tools_list_status(client) == 200
    time.sleep(2.5)
    for method, client in clients.items():
        assert_transport_error(send(client, method), 404)


# F8: a second initialize on a live session -> 400 -32600 (with the request's id).
@pytest.mark.parametrize("initialized", [True, False], ids=["ready", "initializing"])
def test_second_initialize_on_live_session_is_400_invalid_request(client, initialized):
    client.initialize(initialized=initialized)
    message = client.message("initialize", init_params())
    reply = client.request("POST", message, timeout=TIMEOUT)  # carries Mcp-Session-Id
    assert reply.status == 400, reply.body
    body = reply.json
    assert body["error"]["code"] == -32600
    assert body.get("id") == message["id"]
    assert "mcp-session-id" not in reply.headers or reply.headers["mcp-session-id"] == client.session_id
    assert tools_list_status(client) == 200  # the session is unharmed


# --- H1 / H2: MCP-Protocol-Version on session requests ---------------------------------------------

# H1: an invalid or unsupported MCP-Protocol-Version -> 400, on POST, GET and DELETE.
@pytest.mark.parametrize("method", ["POST", "GET", "DELETE"])
@pytest.mark.parametrize("version", ["1999-01-01", "banana", "2026-07-28", "2025-11-25x"])
def test_unsupported_version_header_is_400(session, method, version):
    reply = send(session, method, headers={"MCP-Protocol-Version": version})
    assert_transport_error(reply, 400)
    assert tools_list_status(session) == 200  # even a rejected DELETE leaves the session open


# H2: no version header -> the negotiated version; the request is served.
@pytest.mark.parametrize("negotiated", ["2025-11-25", "2025-06-18"])
def test_missing_version_header_is_200(client, negotiated):
    client.initialize(version=negotiated)
    assert tools_list_status(client, {"MCP-Protocol-Version": None}) == 200


# H1 / §4.9: any supported version is accepted inside a 2025-11-25 session.
@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18", "2025-11-25"])
def test_supported_version_header_in_newer_session_is_200(session, version):
    assert tools_list_status(session, {"MCP-Protocol-Version": version}) == 200


# --- K3: version negotiation in initialize ----------------------------------------------------------

# K3: a supported version is echoed; an unsupported one gets a successful result with our latest.
@pytest.mark.parametrize("requested, negotiated", [
    ("2025-11-25", "2025-11-25"),
    ("2025-06-18", "2025-06-18"),
    ("2025-03-26", "2025-03-26"),
    ("2099-01-01", "2025-11-25"),
    ("2024-11-05", "2025-11-25"),
    ("banana", "2025-11-25"),
])
def test_initialize_negotiates_protocol_version(client, requested, negotiated):
    message = client.message("initialize", init_params(requested))
    reply = client.request("POST", message, session=False, timeout=TIMEOUT)
    assert reply.status == 200, reply.body
    assert reply.json["id"] == message["id"]
    assert reply.json["result"]["protocolVersion"] == negotiated
    assert reply.headers["mcp-session-id"]


# F1 / A6 / A7: the initialize reply follows Accept like any request, and carries the session id
# as a header either way.
@pytest.mark.parametrize("accept, content_type", [
    ("application/json, text/event-stream", "application/json"),
    ("application/json", "application/json"),
    ("text/event-stream, application/json", "text/event-stream"),
    ("text/event-stream", "text/event-stream"),
])
def test_initialize_reply_follows_accept_and_carries_session_id(client, accept, content_type):
    message = client.message("initialize", init_params())
    stream = client.stream("POST", message, {"Accept": accept}, session=False, timeout=TIMEOUT)
    try:
        assert stream.status == 200
        assert VISIBLE_ASCII.match(stream.headers["mcp-session-id"])
        assert stream.headers["content-type"].split(";")[0] == content_type
        if content_type == "application/json":
            reply = json.loads(stream.response.read())
        else:
            replies = stream.messages(timeout=TIMEOUT)
            assert stream.closed_by_server and len(replies) == 1, replies
            reply = replies[0]
    finally:
        stream.close()
    assert reply["id"] == message["id"]
    assert reply["result"]["protocolVersion"] == "2025-11-25"


# --- §3.2: legacy rejections must not look like modern errors ------------------------------------------
# (2026-07-28 requests, with params._meta, are served statelessly: tests/integration/test_modern_http.py.)

# §3.2: "legacy rejections must not look like modern errors": a sessionless request of the old era
# (no _meta, no modern header) -> 400 whose code is NOT -32020/-32021/-32022.
@pytest.mark.parametrize("header", [None, "2025-11-25", "2025-06-18"], ids=["no-header", "2025-11-25", "2025-06-18"])
@pytest.mark.parametrize("method", ["tools/list", "ping"])
def test_legacy_request_without_session_is_400_with_a_legacy_error_code(client, header, method):
    reply = client.request("POST", client.message(method), {"MCP-Protocol-Version": header},
                           session=False, timeout=TIMEOUT)
    assert reply.status == 400, reply.body
    assert reply.content_type == JSON
    assert reply.json["jsonrpc"] == "2.0"
    assert reply.json["error"]["code"] not in MODERN_ERROR_CODES
