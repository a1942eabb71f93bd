"""POST /mcp over raw HTTP against a real daphne: reply types, 202s and HTTP-level rejections.

Checklist ids (/work/shared/spec/spec-checklist.md) are in the comment above each test.
Transport errors have the body {"jsonrpc":"2.0","error":{"code":..,"message":..}} with no "id".
"""
import json

import pytest

from mcp_transport.testing import assert_transport_error

JSON = "application/json"
SSE = "text/event-stream"
TIMEOUT = 10
MAX_REQUEST_BYTES = 4 * 1024 * 1024  # MCP_TRANSPORT["MAX_REQUEST_BYTES"] default


def assert_accepted(reply):
    assert reply.status == 202, (reply.status, reply.body)
    assert reply.body == b""


def read_sse(session, message, headers, timeout=TIMEOUT):
    """POST ``message``; return (stream, events) after the server ends the stream."""
    stream = session.stream("POST", message, headers, timeout=timeout)
    try:
        assert stream.status == 200, (stream.status, stream.response.read())
        events = stream.events(timeout=timeout)
        assert stream.closed_by_server
        return stream, events
    finally:
        stream.close()


def padded_ping(size):
    """A valid JSON-RPC ping of exactly ``size`` bytes."""
    head, tail = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"', b'"}}'
    body = head + b"x" * (size - len(head) - len(tail)) + tail
    assert len(body) == size
    return body


# --- A6 / A7: the reply type follows Accept ----------------------------------------------------

# A6: a request with Accept "application/json, text/event-stream" -> exactly one JSON response.
def test_request_gets_exactly_one_json_response_with_its_id(session):
    message = session.message("tools/list")
    reply = session.request("POST", message, {"Accept": "application/json, text/event-stream"}, timeout=TIMEOUT)
    assert reply.status == 200
    assert reply.content_type == JSON
    body = reply.json
    assert isinstance(body, dict)  # one object, not a batch
    assert set(body) == {"jsonrpc", "id", "result"}
    assert body["jsonrpc"] == "2.0" and body["id"] == message["id"]
    assert isinstance(body["result"]["tools"], list) and body["result"]["tools"]


# A6 / A7: Accepts that rank JSON first (or only JSON) get one application/json response.
@pytest.mark.parametrize("accept", [
    "application/json, text/event-stream",
    "application/json",
    "*/*",
    "application/*",
    "text/event-stream;q=0.5, application/json",
    "text/event-stream;q=0, application/json",
    None,  # no Accept at all: lenient, JSON
])
def test_accept_preferring_json_gets_a_json_response(session, accept):
    message = session.message("tools/list")
    reply = session.request("POST", message, {"Accept": accept}, timeout=TIMEOUT)
    assert reply.status == 200, reply.body
    assert reply.content_type == JSON
    assert reply.json["id"] == message["id"] and "result" in reply.json


# A6 / A7 / A9 / A11 / B1: Accepts that rank SSE first (or only SSE) get a stream: the priming
# event, then the response as the last event, then EOF.
@pytest.mark.parametrize("accept", [
    "text/event-stream, application/json",
    "text/event-stream",
    "text/*",
    "application/json;q=0.5, text/event-stream",
])
def test_accept_preferring_sse_gets_a_stream_ending_with_the_response(session, accept):
    message = session.message("tools/list")
    stream, events = read_sse(session, message, {"Accept": accept})
    assert stream.headers["content-type"].split(";")[0] == SSE
    assert events[0].id and events[0].data == ""  # priming
    last = json.loads(events[-1].data)
    assert last["id"] == message["id"] and "tools" in last["result"]
    assert [e for e in events[1:-1] if e.data] == []  # nothing else for tools/list


# A7: an Accept that allows neither application/json nor text/event-stream -> 406.
@pytest.mark.parametrize("accept", [
    "text/html",
    "application/xml, text/plain",
    "application/json;q=0, text/event-stream;q=0",
])
def test_accept_allowing_neither_type_is_406(session, accept):
    reply = session.request("POST", session.message("tools/list"), {"Accept": accept}, timeout=TIMEOUT)
    assert_transport_error(reply, 406)


# A7 / A6: a client that accepts only JSON gets JSON, even from a tool that reports progress
# (the messages sent before the result have nowhere to go and are dropped).
def test_json_only_accept_gets_json_even_from_a_progress_tool(session):
    message = session.message("tools/call", {"name": "slow_progress", "arguments": {"steps": 2, "interval_ms": 0},
                                             "_meta": {"progressToken": 1}})
    reply = session.request("POST", message, {"Accept": "application/json"}, timeout=TIMEOUT)
    assert reply.status == 200, reply.body
    assert reply.content_type == JSON
    assert reply.json["id"] == message["id"]
    assert reply.json["result"]["structuredContent"] == {"result": "done 2"}


# --- A4 / J5 / N3: 202 Accepted with no body -----------------------------------------------------

# A4: notifications/initialized -> 202, empty body.
def test_initialized_notification_is_202_with_empty_body(client):
    client.initialize(initialized=False)
    reply = client.request("POST", client.message("notifications/initialized", request_id=False), timeout=TIMEOUT)
    assert_accepted(reply)


# A4: a client JSON-RPC response (to a request we never sent, too) -> 202, empty body.
@pytest.mark.parametrize("response", [
    {"jsonrpc": "2.0", "id": "s1", "result": {}},
    {"jsonrpc": "2.0", "id": 12345, "result": {"anything": [1, 2]}},
    {"jsonrpc": "2.0", "id": "s2", "error": {"code": -32601, "message": "Method not found"}},
])
def test_client_response_is_202_with_empty_body(session, response):
    assert_accepted(session.request("POST", response, timeout=TIMEOUT))


# J5: an unknown notification is accepted and never answered.
@pytest.mark.parametrize("method", ["notifications/whatever", "x/y", "notifications/roots/list_changed"])
def test_unknown_notification_is_202(session, method):
    reply = session.request("POST", session.message(method, {"a": 1}, request_id=False), timeout=TIMEOUT)
    assert_accepted(reply)


# N3: "Invalid cancellation notifications SHOULD be ignored" -> still 202.
@pytest.mark.parametrize("params", [
    {"requestId": "never-sent"},
    {"requestId": 987654321},
    {},
    {"requestId": None},
    {"requestId": {"nested": 1}},
    {"requestId": True},
    {"requestId": 1.5, "reason": 7},
])
def test_cancel_of_unknown_or_malformed_request_is_202(session, params):
    reply = session.request("POST", session.message("notifications/cancelled", params, request_id=False),
                            timeout=TIMEOUT)
    assert_accepted(reply)


# --- A8 / 413 / 405: HTTP-level rejections -------------------------------------------------------

# A8: a POST whose Content-Type is not application/json -> 415.
# (A multipart body must be well-formed multipart: twisted, under daphne, answers a malformed one
# with a bare 400 before the application sees the request.)
@pytest.mark.parametrize("content_type, body", [
    ("text/plain", b'{"jsonrpc":"2.0","id":1,"method":"ping"}'),
    ("application/x-www-form-urlencoded", b"jsonrpc=2.0&id=1&method=ping"),
    ("multipart/form-data; boundary=xyz",
     b'--xyz\r\nContent-Disposition: form-data; name="jsonrpc"\r\n\r\n2.0\r\n--xyz--\r\n'),
    ("text/json", b'{"jsonrpc":"2.0","id":1,"method":"ping"}'),
    ("application/json-patch+json", b'{"jsonrpc":"2.0","id":1,"method":"ping"}'),
], ids=["text-plain", "form-urlencoded", "multipart", "text-json", "json-patch"])
def test_non_json_content_type_is_415(session, content_type, body):
    reply = session.request("POST", body, {"Content-Type": content_type}, timeout=TIMEOUT)
    assert_transport_error(reply, 415)


# A8 (the lenient side): parameters, case and a missing Content-Type are all fine.
@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "Application/JSON", None])
def test_json_content_type_variants_are_accepted(session, content_type):
    message = session.message("ping")
    reply = session.request("POST", message, {"Content-Type": content_type}, timeout=TIMEOUT)
    assert reply.status == 200, reply.body
    assert reply.json == {"jsonrpc": "2.0", "id": message["id"], "result": {}}


# MAX_REQUEST_BYTES: one byte over the limit -> 413.
def test_body_over_max_request_bytes_is_413(session):
    reply = session.request("POST", padded_ping(MAX_REQUEST_BYTES + 1), timeout=30)
    assert_transport_error(reply, 413)


# MAX_REQUEST_BYTES: exactly the limit is still served.
def test_body_of_exactly_max_request_bytes_is_served(session):
    reply = session.request("POST", padded_ping(MAX_REQUEST_BYTES), timeout=30)
    assert reply.status == 200, reply.body[:200]
    assert reply.json == {"jsonrpc": "2.0", "id": 1, "result": {}}


# A1 [SDK]: any method but GET, POST and DELETE -> 405 with an Allow header.
@pytest.mark.parametrize("method", ["PUT", "PATCH", "OPTIONS"])
def test_other_http_methods_are_405_with_allow_header(session, method):
    reply = session.request(method, session.message("ping"), timeout=TIMEOUT)
    assert_transport_error(reply, 405)
    assert {m.strip() for m in reply.headers["allow"].split(",")} == {"GET", "POST", "DELETE"}


# Order of checks (transports/endpoint.py, then streamable_post.py): method -> headers (415, 406, 413)
# -> body -> session.
@pytest.mark.parametrize("method, headers, body, status, code", [
    # 405 before the session: no session id at all.
    ("PUT", {"Mcp-Session-Id": None}, b"{", 405, -32600),
    # 415 before the body is parsed.
    ("POST", {"Content-Type": "text/plain"}, b"not json", 415, -32600),
    # 406 before the body is parsed.
    ("POST", {"Accept": "text/html"}, b"not json", 406, -32600),
    # The body is checked before the session: a parse error without any session id is -32700.
    ("POST", {"Mcp-Session-Id": None}, b"{", 400, -32700),
    # 413 before the session: no session id, still 413.
    ("POST", {"Mcp-Session-Id": None}, padded_ping(MAX_REQUEST_BYTES + 1), 413, -32600),
], ids=["405-before-session", "415-before-body", "406-before-body", "body-before-session", "413-before-session"])
def test_checks_run_in_documented_order(session, method, headers, body, status, code):
    assert_transport_error(session.request(method, body, headers, timeout=30), status, code)
