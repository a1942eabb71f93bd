"""jsonrpc: parsing one POST body, building replies, serialising them for a body or an SSE line."""
import json

import pytest
from hypothesis import given, settings, strategies as st

from mcp_transport.protocol import bounds, jsonrpc
from mcp_transport.protocol.errors import (ErrorCode, InvalidParams, InvalidRequest, ParseError,
                                           RemoteProtocolError)
from mcp_transport.protocol.jsonrpc import Notification, Request, Response


def body(obj) -> bytes:
    return json.dumps(obj).encode("utf-8")


# --- parse: valid messages ----------------------------------------------------------------------

@pytest.mark.parametrize("raw, expected", [
    # Requests
    (body({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
     Request(id=1, method="tools/list", params={})),
    (body({"jsonrpc": "2.0", "id": "abc", "method": "ping", "params": {}}),
     Request(id="abc", method="ping", params={})),
    (body({"jsonrpc": "2.0", "id": 0, "method": "ping"}),
     Request(id=0, method="ping", params={})),
    (body({"jsonrpc": "2.0", "id": -7, "method": "ping"}),
     Request(id=-7, method="ping", params={})),
    (body({"jsonrpc": "2.0", "id": "", "method": "ping"}),
     Request(id="", method="ping", params={})),
    (body({"jsonrpc": "2.0", "id": 2**63, "method": "ping"}),
     Request(id=2**63, method="ping", params={})),
    (body({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
           "params": {"name": "echo", "arguments": {"text": "hi"}}}),
     Request(id=3, method="tools/call", params={"name": "echo", "arguments": {"text": "hi"}})),
    (body({"jsonrpc": "2.0", "id": 4, "method": "ping", "params": None}),
     Request(id=4, method="ping", params={})),
    ('{"jsonrpc":"2.0","id":"世界","method":"tools/call","params":{"t":"Hello, 世界"}}'.encode(),
     Request(id="世界", method="tools/call", params={"t": "Hello, 世界"})),
    # Unknown members are ignored.
    (body({"jsonrpc": "2.0", "id": 5, "method": "ping", "extra": [1, 2]}),
     Request(id=5, method="ping", params={})),
    # Whitespace around the object is fine JSON.
    (b' \r\n\t{"jsonrpc":"2.0","id":6,"method":"ping"}\n ',
     Request(id=6, method="ping", params={})),
    # Notifications
    (body({"jsonrpc": "2.0", "method": "notifications/initialized"}),
     Notification(method="notifications/initialized", params={})),
    (body({"jsonrpc": "2.0", "method": "notifications/cancelled",
           "params": {"requestId": 1, "reason": "x"}}),
     Notification(method="notifications/cancelled", params={"requestId": 1, "reason": "x"})),
    (body({"jsonrpc": "2.0", "method": "notifications/initialized", "params": None}),
     Notification(method="notifications/initialized", params={})),
    # Responses (to our sampling / elicitation / roots / ping requests)
    (body({"jsonrpc": "2.0", "id": 1, "result": {}}), Response(id=1, result={})),
    (body({"jsonrpc": "2.0", "id": "s-1", "result": {"roots": []}}),
     Response(id="s-1", result={"roots": []})),
    (body({"jsonrpc": "2.0", "id": 1, "result": None}), Response(id=1, result=None)),
    (body({"jsonrpc": "2.0", "id": 1, "result": [1, "a"]}), Response(id=1, result=[1, "a"])),
    # Error responses
    (body({"jsonrpc": "2.0", "id": 2, "error": {"code": -32601, "message": "nope"}}),
     Response(id=2, error={"code": -32601, "message": "nope"})),
    (body({"jsonrpc": "2.0", "id": 2, "error": {"code": 0}}), Response(id=2, error={"code": 0})),
    (body({"jsonrpc": "2.0", "id": "e", "error": {"code": 1, "message": "m", "data": [1]}}),
     Response(id="e", error={"code": 1, "message": "m", "data": [1]})),
])
def test_parse_valid(raw, expected):
    message = jsonrpc.parse(raw)
    assert type(message) is type(expected)
    assert message == expected


@pytest.mark.parametrize("raw, is_error", [
    (body({"jsonrpc": "2.0", "id": 1, "result": {}}), False),
    (body({"jsonrpc": "2.0", "id": 1, "result": None}), False),
    (body({"jsonrpc": "2.0", "id": 1, "error": {"code": -1, "message": "x"}}), True),
])
def test_response_is_error(raw, is_error):
    assert jsonrpc.parse(raw).is_error is is_error


def test_parsed_params_are_a_fresh_dict_per_message():
    # params defaults to {} for each message; two parses never share (and leak) one dict.
    a = jsonrpc.parse(body({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
    b = jsonrpc.parse(body({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
    a.params["x"] = 1
    assert b.params == {}


# --- parse: invalid messages --------------------------------------------------------------------

PARSE_ERRORS = [
    pytest.param(b"\xff\xfe\xfd", id="invalid-utf8"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"\xc3("}', id="invalid-utf8-in-string"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"\xed\xa0\x80"}', id="utf8-encoded-surrogate"),
    pytest.param('{"jsonrpc":"2.0","id":1,"method":"x"}'.encode("utf-16"), id="utf16"),
    pytest.param(b"", id="empty"),
    pytest.param(b"   ", id="whitespace"),
    pytest.param(b"{", id="truncated"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"ping"', id="unclosed"),
    pytest.param(b"{'jsonrpc':'2.0'}", id="single-quotes"),
    pytest.param(b'{"jsonrpc":"2.0",}', id="trailing-comma"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"ping"} {}', id="two-objects"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n{"jsonrpc":"2.0"}', id="json-lines"),
    pytest.param(b"jsonrpc", id="bare-word"),
    pytest.param(b"NaN", id="nan"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":NaN}}', id="nan-in-params"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":Infinity}}', id="infinity"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":-Infinity}}', id="-infinity"),
    pytest.param(b"[" * 100_000, id="deep-array"),
    pytest.param(b'{"a":' * 100_000, id="deep-object"),
    pytest.param(b'{"jsonrpc":"2.0","id":' + b"1" * 5000 + b',"method":"x"}', id="huge-int"),
    # Valid JSON this server cannot carry (issue 10): a number beyond the doubles would go out as
    # Infinity; a lone surrogate is no Unicode character, so no UTF-8 can hold it.
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":1e999}}', id="1e999"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":[-1E400]}}', id="-1e400"),
    pytest.param(b'{"jsonrpc":"2.0","id":"\\ud800","method":"x"}', id="lone-surrogate-id"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"\\udc00k":1}}', id="lone-surrogate-key"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"result":{"a":["x\\udbff"]}}', id="lone-surrogate-in-result"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":"\\ude00\\ud83d"}}', id="reversed-pair"),
]


@pytest.mark.parametrize("raw", PARSE_ERRORS)
def test_parse_error(raw):
    with pytest.raises(ParseError) as info:
        jsonrpc.parse(raw)
    assert info.value.code == ErrorCode.PARSE_ERROR == -32700
    assert info.value.http_status == 400
    assert isinstance(info.value, RemoteProtocolError)


INVALID_REQUESTS = [
    # Batches were removed in 2025-06-18.
    pytest.param([], id="empty-batch"),
    pytest.param([{"jsonrpc": "2.0", "id": 1, "method": "ping"}], id="batch"),
    pytest.param([{"jsonrpc": "2.0", "method": "a"}, {"jsonrpc": "2.0", "method": "b"}],
                 id="batch-of-notifications"),
    # Not an object
    pytest.param("ping", id="string"),
    pytest.param(1, id="number"),
    pytest.param(1.5, id="float"),
    pytest.param(None, id="null"),
    pytest.param(True, id="true"),
    pytest.param({}, id="empty-object"),
    # jsonrpc member
    pytest.param({"jsonrpc": "1.0", "id": 1, "method": "ping"}, id="jsonrpc-1.0"),
    pytest.param({"id": 1, "method": "ping"}, id="jsonrpc-missing"),
    pytest.param({"jsonrpc": 2.0, "id": 1, "method": "ping"}, id="jsonrpc-number"),
    pytest.param({"jsonrpc": "2.0 ", "id": 1, "method": "ping"}, id="jsonrpc-padded"),
    pytest.param({"jsonrpc": None, "id": 1, "method": "ping"}, id="jsonrpc-null"),
    # Request ids
    pytest.param({"jsonrpc": "2.0", "id": None, "method": "ping"}, id="id-null"),
    pytest.param({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, id="id-float"),
    pytest.param({"jsonrpc": "2.0", "id": 1.0, "method": "ping"}, id="id-float-integral"),
    pytest.param({"jsonrpc": "2.0", "id": {}, "method": "ping"}, id="id-object"),
    pytest.param({"jsonrpc": "2.0", "id": [], "method": "ping"}, id="id-array"),
    pytest.param({"jsonrpc": "2.0", "id": True, "method": "ping"}, id="id-true"),
    pytest.param({"jsonrpc": "2.0", "id": False, "method": "ping"}, id="id-false"),
    # Method
    pytest.param({"jsonrpc": "2.0", "id": 1, "method": ""}, id="method-empty"),
    pytest.param({"jsonrpc": "2.0", "id": 1, "method": None}, id="method-null"),
    pytest.param({"jsonrpc": "2.0", "id": 1, "method": 7}, id="method-number"),
    pytest.param({"jsonrpc": "2.0", "method": ["ping"]}, id="notification-method-array"),
    # Params
    pytest.param({"jsonrpc": "2.0", "id": 1, "method": "x", "params": []}, id="params-array"),
    pytest.param({"jsonrpc": "2.0", "id": 1, "method": "x", "params": [1, 2]}, id="params-positional"),
    pytest.param({"jsonrpc": "2.0", "id": 1, "method": "x", "params": "a"}, id="params-string"),
    pytest.param({"jsonrpc": "2.0", "id": 1, "method": "x", "params": 0}, id="params-number"),
    pytest.param({"jsonrpc": "2.0", "id": 1, "method": "x", "params": False}, id="params-false"),
    pytest.param({"jsonrpc": "2.0", "method": "x", "params": []}, id="notification-params-array"),
    # Responses
    pytest.param({"jsonrpc": "2.0", "id": 1}, id="response-neither"),
    pytest.param({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1}}, id="response-both"),
    pytest.param({"jsonrpc": "2.0", "id": 1, "result": {}, "error": None}, id="response-both-null-error"),
    pytest.param({"jsonrpc": "2.0", "result": {}}, id="response-no-id"),
    pytest.param({"jsonrpc": "2.0", "id": None, "result": {}}, id="response-id-null"),
    pytest.param({"jsonrpc": "2.0", "id": None, "error": {"code": -32700}}, id="error-id-null"),
    pytest.param({"jsonrpc": "2.0", "id": 1.5, "result": {}}, id="response-id-float"),
    pytest.param({"jsonrpc": "2.0", "id": True, "result": {}}, id="response-id-bool"),
    pytest.param({"jsonrpc": "2.0", "id": 1, "error": None}, id="error-null"),
    pytest.param({"jsonrpc": "2.0", "id": 1, "error": "boom"}, id="error-string"),
    pytest.param({"jsonrpc": "2.0", "id": 1, "error": []}, id="error-array"),
    pytest.param({"jsonrpc": "2.0", "id": 1, "error": {}}, id="error-no-code"),
    pytest.param({"jsonrpc": "2.0", "id": 1, "error": {"message": "x"}}, id="error-message-only"),
    pytest.param({"jsonrpc": "2.0", "id": 1, "error": {"code": "-32600"}}, id="error-code-string"),
    pytest.param({"jsonrpc": "2.0", "id": 1, "error": {"code": -1.5}}, id="error-code-float"),
    pytest.param({"jsonrpc": "2.0", "id": 1, "error": {"code": True}}, id="error-code-true"),
    pytest.param({"jsonrpc": "2.0", "id": 1, "error": {"code": False}}, id="error-code-false"),
    pytest.param({"jsonrpc": "2.0", "id": 1, "error": {"code": None}}, id="error-code-null"),
]


@pytest.mark.parametrize("obj", INVALID_REQUESTS)
def test_invalid_request(obj):
    with pytest.raises(InvalidRequest) as info:
        jsonrpc.parse(body(obj))
    assert info.value.code == ErrorCode.INVALID_REQUEST == -32600
    assert info.value.http_status == 400
    assert not isinstance(info.value, ParseError)


@pytest.mark.parametrize("raw", [b"[]", b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]'])
def test_batch_error_says_batches_are_unsupported(raw):
    # Batches get their own message, so a 2025-03-26-era client learns why it was refused.
    with pytest.raises(InvalidRequest, match="(?i)batch"):
        jsonrpc.parse(raw)


@pytest.mark.parametrize("raw, exc_type", [
    (b"[]", InvalidRequest),
    (b"[", ParseError),
    (b'"unterminated', ParseError),
    (b'"terminated"', InvalidRequest),
])
def test_parse_error_versus_invalid_request(raw, exc_type):
    # -32700 only for bytes that are not JSON at all; valid JSON of the wrong shape is -32600.
    with pytest.raises(RemoteProtocolError) as info:
        jsonrpc.parse(raw)
    assert type(info.value) is exc_type


# --- parse: the fuzz invariant (h11 style) ------------------------------------------------------

def check_parse_invariant(raw):
    """parse returns a message or raises RemoteProtocolError; anything else escaping is a bug."""
    try:
        message = jsonrpc.parse(raw)
    except RemoteProtocolError as exc:
        assert isinstance(exc, (ParseError, InvalidRequest))
        assert exc.http_status == 400
        return None
    assert isinstance(message, (Request, Notification, Response))
    if isinstance(message, (Request, Notification)):
        assert isinstance(message.method, str) and message.method
        assert isinstance(message.params, dict)
    if isinstance(message, (Request, Response)):
        assert isinstance(message.id, (str, int)) and not isinstance(message.id, bool)
    return message


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_parse_never_raises_anything_else_on_bytes(raw):
    check_parse_invariant(raw)


JSON_SCALARS = (st.none() | st.booleans() | st.integers() | st.text(max_size=10)
                | st.floats(allow_nan=False, allow_infinity=False))
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_parse_never_raises_anything_else_on_json(value):
    check_parse_invariant(json.dumps(value).encode("utf-8"))


# Objects shaped like JSON-RPC, so the fuzz also reaches the request/response branches.
RPCISH = st.fixed_dictionaries({}, optional={
    "jsonrpc": st.just("2.0") | JSON_SCALARS,
    "id": st.integers() | st.text(max_size=5) | JSON_VALUES,
    "method": st.sampled_from(["ping", "tools/list", "", "notifications/initialized"]) | JSON_VALUES,
    "params": st.dictionaries(st.text(max_size=5), JSON_VALUES, max_size=3) | JSON_VALUES,
    "result": JSON_VALUES,
    "error": st.fixed_dictionaries({"code": JSON_SCALARS}, optional={"message": st.text()})
    | JSON_VALUES,
})


@settings(max_examples=200, deadline=None)
@given(RPCISH)
def test_parse_never_raises_anything_else_on_rpc_shaped_objects(obj):
    message = check_parse_invariant(json.dumps(obj).encode("utf-8"))
    if message is not None:
        # Whatever parses must be what the object said.
        assert obj["jsonrpc"] == "2.0"
        if "method" in obj:
            assert message.method == obj["method"]
            assert ("id" in obj) == isinstance(message, Request)
        else:
            assert isinstance(message, Response) and message.id == obj["id"]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=40), st.integers(min_value=0, max_value=60))
def test_parse_invariant_on_corrupted_valid_message(junk, at):
    valid = body({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}})
    at = min(at, len(valid))
    check_parse_invariant(valid[:at] + junk + valid[at:])


# --- builders -----------------------------------------------------------------------------------

@pytest.mark.parametrize("request_id, code, message, data, expected", [
    (None, ErrorCode.PARSE_ERROR, "bad", None,
     {"jsonrpc": "2.0", "error": {"code": -32700, "message": "bad"}}),
    (1, -32601, "no such method", None,
     {"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "no such method"}}),
    (0, -32602, "bad params", {"field": "x"},
     {"jsonrpc": "2.0", "id": 0, "error": {"code": -32602, "message": "bad params",
                                           "data": {"field": "x"}}}),
    ("", -32600, "m", None, {"jsonrpc": "2.0", "id": "", "error": {"code": -32600, "message": "m"}}),
    ("r", -32603, "m", 0, {"jsonrpc": "2.0", "id": "r",
                           "error": {"code": -32603, "message": "m", "data": 0}}),
])
def test_error_message(request_id, code, message, data, expected):
    msg = jsonrpc.error_message(request_id, code, message, data)
    assert msg == expected
    assert type(msg["error"]["code"]) is int  # not the IntEnum
    # Falsy ids (0, "") are real ids and are kept; only None is omitted.
    assert ("id" in msg) == (request_id is not None)


def test_error_message_without_id_serialises_without_id():
    out = json.loads(jsonrpc.dumps(jsonrpc.error_message(None, ErrorCode.INVALID_REQUEST, "x")))
    assert "id" not in out
    assert out["error"]["code"] == -32600


@pytest.mark.parametrize("build, expected", [
    (lambda: jsonrpc.result_message(1, {"tools": []}),
     {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}),
    (lambda: jsonrpc.result_message("a", {}), {"jsonrpc": "2.0", "id": "a", "result": {}}),
    (lambda: jsonrpc.request_message(7, "sampling/createMessage", {"messages": []}),
     {"jsonrpc": "2.0", "id": 7, "method": "sampling/createMessage", "params": {"messages": []}}),
    (lambda: jsonrpc.request_message("p", "ping"), {"jsonrpc": "2.0", "id": "p", "method": "ping"}),
    (lambda: jsonrpc.request_message(1, "ping", {}),
     {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}}),
    (lambda: jsonrpc.notification_message("notifications/tools/list_changed"),
     {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
    (lambda: jsonrpc.notification_message("notifications/message", {"level": "info"}),
     {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}}),
])
def test_builders(build, expected):
    assert build() == expected


@pytest.mark.parametrize("message", [
    jsonrpc.request_message(1, "ping"),
    jsonrpc.request_message("id-1", "tools/call", {"name": "echo", "arguments": {"t": "Hello, 世界"}}),
    jsonrpc.notification_message("notifications/cancelled", {"requestId": 3}),
    jsonrpc.result_message(9, {"content": [{"type": "text", "text": "a\nb"}]}),
    jsonrpc.error_message(2, -32601, "nope"),
])
def test_built_messages_parse_back(message):
    parsed = jsonrpc.parse(jsonrpc.dumps(message))
    if "method" in message:
        assert parsed.method == message["method"]
        assert parsed.params == message.get("params", {})
    if "id" in message:
        assert parsed.id == message["id"]
    if "result" in message:
        assert parsed.result == message["result"] and not parsed.is_error
    if "error" in message:
        assert parsed.error == message["error"] and parsed.is_error


# --- dumps --------------------------------------------------------------------------------------

@pytest.mark.parametrize("message", [
    {"jsonrpc": "2.0", "id": 1, "result": {"text": "line 1\nline 2\r\nline 3\rend"}},
    {"jsonrpc": "2.0", "id": 1, "result": {"text": "\n\n\n", "k\ney": "\r"}},
    {"jsonrpc": "2.0", "id": 1, "result": {"nested": [{"a": "x\ny"}, ["\n"]]}},
    {"jsonrpc": "2.0", "id": 1, "result": {"text": "\u2028\u2029\x85\x0b\x0c"}},
])
def test_dumps_has_no_raw_line_break(message):
    out = jsonrpc.dumps(message)
    assert isinstance(out, bytes)
    assert b"\n" not in out and b"\r" not in out
    assert json.loads(out.decode("utf-8")) == message


def test_dumps_is_compact_and_keeps_non_ascii():
    message = jsonrpc.result_message(1, {"text": "Hello, 世界"})
    out = jsonrpc.dumps(message)
    assert out == '{"jsonrpc":"2.0","id":1,"result":{"text":"Hello, 世界"}}'.encode("utf-8")
    assert "世界".encode("utf-8") in out  # raw UTF-8, not \\u escapes
    assert json.loads(out.decode("utf-8")) == message


def test_dumps_then_parse_round_trips_non_ascii():
    message = jsonrpc.request_message("世界", "tools/call", {"text": "Hello, 世界 🎉"})
    assert jsonrpc.parse(jsonrpc.dumps(message)) == Request(
        id="世界", method="tools/call", params={"text": "Hello, 世界 🎉"})


def test_dumps_survives_a_lone_surrogate_from_a_tool():
    # A tool's string may hold "\ud800" (decoded with surrogateescape, say): escaped, still JSON.
    out = jsonrpc.dumps(jsonrpc.error_message("\ud800x", -32601, "Method not found"))
    out.decode("utf-8")  # strictly valid UTF-8
    assert b"\n" not in out
    assert json.loads(out)["id"] == "\ud800x"


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_dumps_round_trips_any_json_value(value):
    out = jsonrpc.dumps({"jsonrpc": "2.0", "id": 1, "result": value})
    assert b"\n" not in out and b"\r" not in out
    assert json.loads(out.decode("utf-8"))["result"] == value


@settings(max_examples=100, deadline=None)
# An id within the parser's bound (256 bytes): 64 characters are at most 256 bytes of UTF-8.
@given(request_id=st.integers(min_value=-2**63, max_value=2**64 - 1) | st.text(max_size=64),
       method=st.text(min_size=1),
       params=st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=4))
def test_request_round_trip(request_id, method, params):
    message = jsonrpc.parse(jsonrpc.dumps(jsonrpc.request_message(request_id, method, params)))
    assert message == Request(id=request_id, method=method, params=params)


def test_a_valid_surrogate_pair_and_nul_are_kept():
    request = jsonrpc.parse(b'{"jsonrpc":"2.0","id":"\\ud83d\\ude00\\u0000","method":"x"}')
    assert request.id == "\U0001F600\x00"


@pytest.mark.parametrize("request_id, valid", [(2**64 - 1, True), (2**64, False), (-2**63, True),
                                               (-2**63 - 1, False)])
def test_integer_ids_are_64_bit(request_id, valid):
    raw = body({"jsonrpc": "2.0", "id": request_id, "method": "ping"})
    if valid:
        assert jsonrpc.parse(raw).id == request_id
    else:
        with pytest.raises(InvalidRequest):
            jsonrpc.parse(raw)
    response = body({"jsonrpc": "2.0", "id": request_id, "result": {}})
    if not valid:
        with pytest.raises(InvalidRequest):
            jsonrpc.parse(response)


def test_dumps_never_writes_a_non_finite_number():
    out = jsonrpc.dumps({"a": float("nan"), "b": [float("inf"), -float("inf"), 1.5], "c": {"d": (float("nan"),)}})
    assert json.loads(out) == {"a": None, "b": [None, None, 1.5], "c": {"d": [None]}}
    assert b"NaN" not in out and b"Infinity" not in out


@pytest.mark.parametrize("params, token", [({}, None), ({"_meta": {}}, None), ({"_meta": {"progressToken": "t"}}, "t"),
                                           ({"_meta": {"progressToken": 7}}, 7),
                                           ({"_meta": {"progressToken": "\x00"}}, "\x00")])
def test_progress_token(params, token):
    assert jsonrpc.progress_token(params) == token


@pytest.mark.parametrize("params", [{"_meta": []}, {"_meta": "x"}, {"_meta": {"progressToken": 1.5}},
                                    {"_meta": {"progressToken": True}}, {"_meta": {"progressToken": {}}},
                                    {"_meta": {"progressToken": 2**64}}])
def test_a_bad_progress_token_is_invalid_params(params):
    from mcp_transport.protocol.errors import InvalidParams

    with pytest.raises(InvalidParams):
        jsonrpc.progress_token(params)


# -- within_size: MAX_EVENT_BYTES ----------------------------------------------------------

def test_within_size_keeps_what_fits():
    message = jsonrpc.result_message(1, {"content": []})
    data = jsonrpc.dumps(message)
    assert jsonrpc.within_size(message, data, len(data)) == (message, data)


def test_within_size_turns_an_oversized_tool_result_into_an_error_result():
    message = jsonrpc.result_message(7, {"content": [{"type": "text", "text": "x" * 500}]})
    replaced, data = jsonrpc.within_size(message, jsonrpc.dumps(message), 100)
    assert replaced["id"] == 7 and replaced["result"]["isError"] is True
    assert "100 bytes" in replaced["result"]["content"][0]["text"]
    assert data == jsonrpc.dumps(replaced)


def test_within_size_turns_another_oversized_result_into_an_error_with_its_id():
    message = jsonrpc.result_message("r", {"contents": [{"uri": "x", "text": "y" * 500}]})
    replaced, _ = jsonrpc.within_size(message, jsonrpc.dumps(message), 100)
    assert replaced["id"] == "r" and replaced["error"]["code"] == -32603 and "result" not in replaced


def test_within_size_drops_oversized_notifications_and_requests():
    for message in (jsonrpc.notification_message("notifications/message", {"data": "z" * 500}),
                    jsonrpc.request_message(3, "sampling/createMessage", {"data": "z" * 500})):
        assert jsonrpc.within_size(message, jsonrpc.dumps(message), 100) == (None, b"")


# -- the shape bound (protocol/bounds.py): depth and id length, before anything is kept --------

def _nested(levels):
    value = 1
    for n in range(levels):
        value = {"a": value} if n % 2 else [value]
    return value


def test_a_message_at_the_depth_bound_parses_and_one_deeper_is_refused():
    at_bound = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": _nested(62)}}  # 1 + 1 + 62
    assert jsonrpc.parse(json.dumps(at_bound).encode()).params["x"] == _nested(62)
    deeper = {**at_bound, "params": {"x": _nested(63)}}
    with pytest.raises(InvalidParams) as refused:
        jsonrpc.parse(json.dumps(deeper).encode())
    assert refused.value.http_status == 400 and "64 deep" in refused.value.message


def test_depth_costs_no_stack_and_brackets_inside_strings_do_not_count():
    deep = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":' + b"[" * 900 + b"]" * 900 + b"}}"
    with pytest.raises(InvalidParams):
        jsonrpc.parse(deep)
    flat = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "[{" * 500}}).encode()
    assert jsonrpc.parse(flat).method == "ping"


def test_the_bound_is_the_callers():
    message = json.dumps({"jsonrpc": "2.0", "id": "abcd", "method": "ping", "params": {"x": [[1]]}}).encode()
    with pytest.raises(InvalidParams):
        jsonrpc.parse(message, bounds.Bounds(max_depth=3))
    with pytest.raises(InvalidRequest):
        jsonrpc.parse(message, bounds.Bounds(max_id_bytes=3))
    assert jsonrpc.parse(message, bounds.Bounds(max_depth=4, max_id_bytes=4)).id == "abcd"


@pytest.mark.parametrize("message", [
    {"jsonrpc": "2.0", "id": "x" * 257, "method": "ping"},
    {"jsonrpc": "2.0", "id": "é" * 129, "result": {}},
    {"jsonrpc": "2.0", "method": "tools/call", "params": {"_meta": {"progressToken": "x" * 257}}},
])
def test_a_string_id_or_progress_token_over_the_bound_is_refused(message):
    with pytest.raises(InvalidRequest):
        jsonrpc.parse(json.dumps(message).encode())
