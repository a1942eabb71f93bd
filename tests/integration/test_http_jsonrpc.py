"""JSON-RPC validity over raw HTTP: malformed bodies are HTTP 400 (-32700 / -32600, no "id");
errors of well-formed requests are in-band (HTTP 200 carrying the request's id), never 404.

Every test runs inside a live session, so a 400 here can only come from the body (a missing
session would also be 400 -32600, but these requests all carry a valid one).
"""
import json

import pytest

from mcp_transport.testing import assert_transport_error

JSON = "application/json"
TIMEOUT = 10
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


def post_raw(session, body: bytes):
    return session.request("POST", body, timeout=TIMEOUT)


def post_json(session, obj):
    return post_raw(session, json.dumps(obj).encode())


def in_band_error(session, method, params=None):
    """The error of a well-formed request: HTTP 200, the request's id, no result."""
    message = session.message(method, params)
    reply = session.request("POST", message, timeout=TIMEOUT)
    assert reply.status == 200, (reply.status, reply.body)
    assert reply.content_type == JSON
    body = reply.json
    assert body["jsonrpc"] == "2.0" and body["id"] == message["id"], body
    assert "result" not in body, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]


def tool_result(session, name, arguments):
    reply = session.call("tools/call", {"name": name, "arguments": arguments})
    assert "error" not in reply, reply
    return reply["result"]


# --- HTTP 400: the body is not one valid JSON-RPC message ---------------------------------------

# A3: batches were removed in 2025-06-18 -> 400 -32600.
@pytest.mark.parametrize("batch", [
    [PING, {**PING, "id": 2}],
    [PING],
    [],
], ids=["two", "one", "empty"])
def test_batch_is_rejected_with_400_invalid_request(session, batch):
    assert_transport_error(post_json(session, batch), 400, -32600)


# J6: not JSON at all -> 400 -32700.
@pytest.mark.parametrize("body", [
    b"{",
    b"",
    b"not json",
    b'{"jsonrpc":"2.0","id":1,"method":"ping"',
    b'{"jsonrpc":"2.0","id":1,"method":"ping"} trailing',
    b"{'jsonrpc':'2.0','id':1,'method':'ping'}",
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":NaN}}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":-Infinity}}',
], ids=["open-brace", "empty", "words", "truncated", "trailing", "single-quotes", "NaN", "-Infinity"])
def test_malformed_json_is_400_parse_error(session, body):
    assert_transport_error(post_raw(session, body), 400, -32700)


# A2: "JSON-RPC messages MUST be UTF-8 encoded" -> invalid UTF-8 is 400 -32700.
@pytest.mark.parametrize("bad_bytes", [
    b"\xff\xfe",          # never valid in UTF-8
    b"\xc0\xaf",          # overlong encoding of "/"
    b"\xed\xa0\x80",      # an encoded surrogate (CESU-8)
    b"\xe4\xb8",          # truncated 3-byte sequence
    b"caf\xe9",           # Latin-1
], ids=["ff-fe", "overlong", "surrogate", "truncated", "latin1"])
def test_invalid_utf8_is_400_parse_error(session, bad_bytes):
    body = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' + bad_bytes + b'"}}'
    assert_transport_error(post_raw(session, body), 400, -32700)


# J1 / A5: valid JSON that is not a JSON-RPC object -> 400 -32600.
@pytest.mark.parametrize("body", [b"42", b'"ping"', b"null", b"true"])
def test_json_that_is_not_an_object_is_400_invalid_request(session, body):
    assert_transport_error(post_raw(session, body), 400, -32600)


# J1: "jsonrpc" must be exactly "2.0".
@pytest.mark.parametrize("jsonrpc", ["1.0", 2.0, "2", None, "missing"])
def test_wrong_jsonrpc_version_is_400_invalid_request(session, jsonrpc):
    message = {"id": 1, "method": "ping"} if jsonrpc == "missing" else {**PING, "jsonrpc": jsonrpc}
    assert_transport_error(post_json(session, message), 400, -32600)


# J2: "Requests MUST include a string or integer ID ... MUST NOT be null" (id:null is not a notification).
@pytest.mark.parametrize("request_id", [None, 1.5, {}, True, False, [1]],
                         ids=["null", "float", "object", "true", "false", "array"])
def test_request_id_not_string_or_integer_is_400_invalid_request(session, request_id):
    assert_transport_error(post_json(session, {**PING, "id": request_id}), 400, -32600)


# J1: params, when present, must be an object (MCP never uses positional params).
@pytest.mark.parametrize("params", [[1, 2], [], "x", 5, True])
def test_params_not_an_object_is_400_invalid_request(session, params):
    assert_transport_error(post_json(session, {**PING, "params": params}), 400, -32600)


# J1: method must be a non-empty string.
@pytest.mark.parametrize("method", [5, "", None, ["ping"]])
def test_method_not_a_nonempty_string_is_400_invalid_request(session, method):
    assert_transport_error(post_json(session, {**PING, "method": method}), 400, -32600)


# J1 / J4: a client "response" must have a valid id and exactly one of result and error.
@pytest.mark.parametrize("message", [
    {"jsonrpc": "2.0", "id": "s1"},
    {"jsonrpc": "2.0", "id": "s1", "result": {}, "error": {"code": -1, "message": "x"}},
    {"jsonrpc": "2.0", "id": None, "result": {}},
    {"jsonrpc": "2.0", "result": {}},
    {"jsonrpc": "2.0", "id": "s1", "error": {"code": "-1", "message": "x"}},
    {"jsonrpc": "2.0", "id": "s1", "error": "boom"},
], ids=["neither", "both", "null-id", "no-id", "string-code", "string-error"])
def test_malformed_client_response_is_400_invalid_request(session, message):
    assert_transport_error(post_json(session, message), 400, -32600)


# --- In-band errors (HTTP 200 with the request's id) ----------------------------------------------

# J6 / F6: an unknown method is -32601 in-band, never 404 (404 means "session gone").
@pytest.mark.parametrize("method", ["foo/bar", "tools/nope", "initialise"])
def test_unknown_method_is_in_band_method_not_found(session, method):
    assert in_band_error(session, method, {})["code"] == -32601


# L8: an unknown tool is a protocol error -32602.
def test_tools_call_unknown_tool_is_in_band_invalid_params(session):
    assert in_band_error(session, "tools/call", {"name": "no_such_tool", "arguments": {}})["code"] == -32602


# L8 / §4.14: a tools/call that fails the CallToolRequest schema is -32602.
@pytest.mark.parametrize("params", [
    {},
    {"name": ""},
    {"name": 5},
    {"name": "echo", "arguments": ["hi"]},
    {"name": "echo", "arguments": "hi"},
], ids=["no-name", "empty-name", "int-name", "array-arguments", "string-arguments"])
def test_tools_call_with_malformed_params_is_in_band_invalid_params(session, params):
    assert in_band_error(session, "tools/call", params)["code"] == -32602


# L9: arguments failing the tool's inputSchema -> result.isError, not a JSON-RPC error.
@pytest.mark.parametrize("arguments", [{"text": 123}, {"text": None}, {}, {"text": ["a"]}],
                         ids=["int", "null", "missing", "array"])
def test_tools_call_with_invalid_arguments_is_an_error_result(session, arguments):
    result = tool_result(session, "echo", arguments)
    assert result["isError"] is True
    texts = [block["text"] for block in result["content"] if block["type"] == "text"]
    assert texts and all(texts)


# L9 (contrast): valid arguments give a normal result.
def test_tools_call_with_valid_arguments_is_not_an_error(session):
    result = tool_result(session, "echo", {"text": "ok"})
    assert result.get("isError") in (None, False)
    assert result["structuredContent"] == {"result": "ok"}


# Q2: "Invalid cursors SHOULD result in an error with code -32602".
@pytest.mark.parametrize("method", ["tools/list", "resources/list", "resources/templates/list", "prompts/list",
                                    "skills/list"])
@pytest.mark.parametrize("cursor", ["!!bogus", "", 42, "eyJub3BlIjogMX0="],  # last: base64 of {"nope": 1}
                         ids=["bogus", "empty", "int", "foreign-json"])
def test_bogus_cursor_is_in_band_invalid_params(session, method, cursor):
    assert in_band_error(session, method, {"cursor": cursor})["code"] == -32602


# P3: "Invalid log level: -32602".
@pytest.mark.parametrize("level", ["verbose", "INFO", "", None, 3])
def test_unknown_log_level_is_in_band_invalid_params(session, level):
    assert in_band_error(session, "logging/setLevel", {"level": level})["code"] == -32602


# P2 (contrast): a valid level gets an empty result.
def test_valid_log_level_gets_empty_result(session):
    reply = session.call("logging/setLevel", {"level": "warning"})
    assert "error" not in reply, reply
    assert reply["result"] == {}


# J6: resources/read of an unknown URI -> in-band -32002 (resource not found, 2025-11-25).
@pytest.mark.parametrize("uri", ["test://nope", "test://template/1/other", "file:///etc/passwd"])
def test_resources_read_unknown_uri_is_in_band_resource_not_found(session, uri):
    error = in_band_error(session, "resources/read", {"uri": uri})
    assert error["code"] == -32002
    assert error.get("data", {}).get("uri") == uri
