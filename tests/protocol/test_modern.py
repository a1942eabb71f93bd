"""The 2026-07-28 wire rules (protocol/modern.py): era routing and the checks of a modern request,
in the order of spec-checklist §3.2."""
import pytest

from mcp_transport.protocol import jsonrpc, modern
from mcp_transport.protocol.errors import InvalidParams
from mcp_transport.protocol.jsonrpc import Notification, Request, Response

V = "2026-07-28"
META = {modern.META_PROTOCOL_VERSION: V, modern.META_CLIENT_CAPABILITIES: {}}


def request(method="tools/list", meta=META, **params):
    if meta is not None:
        params["_meta"] = meta
    return Request(id=7, method=method, params=params)


def headers(method="tools/list", version=V, **extra):
    found = {"mcp-protocol-version": version, "mcp-method": method}
    found.update({k.replace("_", "-"): v for k, v in extra.items()})
    return {k: v for k, v in found.items() if v is not None}


# --- §3.2 step 4: which era -----------------------------------------------------------------------

@pytest.mark.parametrize("message, found, expected", [
    (request(), {}, True),                                                   # body first
    (request(), {"mcp-protocol-version": "2025-11-25"}, True),               # body wins over a header
    (request(meta=None), {"mcp-protocol-version": V}, True),                 # a modern header alone
    (request(meta=None), {"mcp-protocol-version": "v999"}, True),            # unknown: modern, then -32022
    (request(meta=None), {"mcp-protocol-version": "2025-11-25"}, False),
    (request(meta=None), {}, False),
    (request("initialize", meta=None), {"mcp-protocol-version": V}, False),  # initialize selects legacy
    (request(), {"mcp-session-id": "abc"}, False),                           # a session chose its era
    (Notification(method="notifications/cancelled", params={"_meta": META}), {}, True),
    (Response(id=1, result={}), {"mcp-protocol-version": V}, False),
])
def test_is_modern(message, found, expected):
    assert modern.is_modern(message, found) is expected


# --- §3.2 step 5: the ladder ------------------------------------------------------------------------

def test_a_well_formed_request_passes_and_returns_its_meta():
    assert modern.check_envelope(request(), headers()) == META


def test_header_and_body_versions_must_match_before_the_version_is_judged():
    with pytest.raises(modern.HeaderMismatch):
        modern.check_envelope(request(meta={**META, modern.META_PROTOCOL_VERSION: "v999"}), headers())


def test_a_missing_version_header_is_a_mismatch():
    with pytest.raises(modern.HeaderMismatch):
        modern.check_envelope(request(), headers(version=None))


def test_unsupported_version_names_supported_and_requested():
    with pytest.raises(modern.UnsupportedVersion) as caught:
        modern.check_envelope(request(meta={**META, modern.META_PROTOCOL_VERSION: "v999"}), headers(version="v999"))
    assert caught.value.http_status == 400 and caught.value.code == -32022
    assert caught.value.data == {"supported": ["2026-07-28"], "requested": "v999"}


@pytest.mark.parametrize("meta", [None, {modern.META_CLIENT_CAPABILITIES: {}}, {modern.META_PROTOCOL_VERSION: V},
                                  {**META, modern.META_CLIENT_CAPABILITIES: []},
                                  {**META, modern.META_LOG_LEVEL: "loud"}])
def test_required_meta_fields_are_400_invalid_params(meta):
    with pytest.raises(modern.InvalidMeta) as caught:
        modern.check_envelope(request(meta=meta), headers())
    assert (caught.value.http_status, caught.value.code) == (400, -32602)


#: What "The progress token MUST be a string or integer value" lets through, and what it does
#: not, in both eras (NUL is kept as sent; non-finite numbers and lone surrogates never parse).
GOOD_PROGRESS_TOKENS = [None, "t", "", "\x00", 7, 0, -2**63, 2**64 - 1]
BAD_PROGRESS_TOKENS = [1.5, 1.0, True, False, {}, [], [1], 2**64, -2**63 - 1]


@pytest.mark.parametrize("token", BAD_PROGRESS_TOKENS)
def test_a_bad_progress_token_is_400_invalid_params_as_in_the_legacy_era(token):
    meta = {**META, "progressToken": token}
    with pytest.raises(modern.InvalidMeta) as caught:
        modern.check_envelope(request("tools/call", meta=meta, name="echo"), headers("tools/call", mcp_name="echo"),
                              "name")
    assert (caught.value.http_status, caught.value.code) == (400, -32602)
    with pytest.raises(InvalidParams) as legacy:  # the same rule, answered in-band in the legacy era
        jsonrpc.progress_token({"_meta": {"progressToken": token}})
    assert caught.value.message == legacy.value.message


@pytest.mark.parametrize("token", GOOD_PROGRESS_TOKENS)
def test_a_good_progress_token_passes_in_both_eras(token):
    meta = {**META, "progressToken": token}
    assert modern.check_envelope(request(meta=meta), headers()) == meta
    assert jsonrpc.progress_token({"_meta": {"progressToken": token}}) == token


def test_client_info_is_optional():
    modern.check_envelope(request(), headers())


@pytest.mark.parametrize("method_header", [None, "prompts/list", "TOOLS/LIST"])
def test_mcp_method_must_equal_the_method_case_sensitively(method_header):
    with pytest.raises(modern.HeaderMismatch):
        modern.check_envelope(request(), headers(method=method_header))


@pytest.mark.parametrize("name_header, ok", [("echo", True), ("  echo\t", True), ("=?base64?ZWNobw==?=", True),
                                             (None, False), ("bar", False), ("Echo", False)])
def test_mcp_name_must_equal_params_name(name_header, ok):
    call = request("tools/call", name="echo")
    found = headers("tools/call", mcp_name=name_header)
    if ok:
        modern.check_envelope(call, found, "name")  # the key tools/call declares (methods/specs.py)
    else:
        with pytest.raises(modern.HeaderMismatch):
            modern.check_envelope(call, found, "name")


def test_mcp_name_of_resources_read_is_the_uri():
    modern.check_envelope(request("resources/read", uri="test://x"), headers("resources/read", mcp_name="test://x"),
                          "uri")
    with pytest.raises(modern.HeaderMismatch):
        modern.check_envelope(request("resources/read", uri="test://x"), headers("resources/read"), "uri")


# --- Mcp-Param-* and base64 ------------------------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"},
                                           "priority": {"type": "integer", "x-mcp-header": "Priority"},
                                           "verbose": {"type": "boolean", "x-mcp-header": "Verbose"},
                                           "query": {"type": "string"}}}


@pytest.mark.parametrize("arguments, found", [
    ({"region": "Hello"}, {"mcp-param-region": "=?base64?SGVsbG8=?="}),
    ({"region": "SGVsbG8="}, {"mcp-param-region": "SGVsbG8="}),                 # no wrapper: literal
    ({"region": "=?base64?SGVsbG8="}, {"mcp-param-region": "=?base64?SGVsbG8="}),
    ({"priority": 42}, {"mcp-param-priority": "42"}),
    ({"priority": 42}, {"mcp-param-priority": "42.0"}),                         # compared numerically
    ({"verbose": True}, {"mcp-param-verbose": "true"}),
    ({"query": "x"}, {}),                                                       # not annotated
    ({}, {}),
])
def test_param_headers_that_match(arguments, found):
    modern.check_param_headers(arguments, SCHEMA, found)


@pytest.mark.parametrize("arguments, found", [
    ({"region": "Hello"}, {"mcp-param-region": "=?base64?SGVsbG8?="}),          # bad padding
    ({"region": "Hello"}, {"mcp-param-region": "=?base64?SGVs!!!bG8=?="}),      # outside the alphabet
    ({"region": "test-value"}, {}),                                             # header missing
    ({"region": "a"}, {"mcp-param-region": "b"}),
    ({"priority": 42}, {"mcp-param-priority": "43"}),
    ({"verbose": False}, {"mcp-param-verbose": "true"}),
])
def test_param_headers_that_do_not_match_are_header_mismatch(arguments, found):
    with pytest.raises(modern.HeaderMismatch) as caught:
        modern.check_param_headers(arguments, SCHEMA, found)
    assert (caught.value.http_status, caught.value.code) == (400, -32020)


# --- results and listen filters ----------------------------------------------------------------------

def test_stamp_adds_result_type_server_info_and_cache_hints_keeping_meta():
    result = modern.stamp({"tools": [], "_meta": {"x": 1}}, {"name": "s", "version": "1"}, (5, "public"))
    assert result == {"tools": [], "resultType": "complete", "ttlMs": 5, "cacheScope": "public",
                      "_meta": {"x": 1, modern.META_SERVER_INFO: {"name": "s", "version": "1"}}}


def test_stamp_leaves_an_input_required_result_without_cache_hints():
    result = modern.stamp({"resultType": "input_required"}, {}, (5, "public"))
    assert "ttlMs" not in result and result["resultType"] == "input_required"


CAPS = {"tools": {"listChanged": True}, "resources": {"subscribe": True, "listChanged": True}}


def test_honored_filter_keeps_only_what_the_server_declares():
    honored = modern.honored_filter({"toolsListChanged": True, "promptsListChanged": True,
                                     "resourcesListChanged": False, "resourceSubscriptions": ["a://1", "a://1"]}, CAPS)
    assert honored == {"toolsListChanged": True, "resourceSubscriptions": ["a://1"]}


@pytest.mark.parametrize("requested", [None, [], {"resourceSubscriptions": "a://1"}])
def test_a_malformed_filter_is_invalid_params(requested):
    with pytest.raises(modern.InvalidMeta):
        modern.honored_filter(requested, CAPS)


def test_wanted_lets_through_only_requested_types():
    honored = {"promptsListChanged": True, "resourceSubscriptions": ["a://1"]}
    assert modern.wanted(honored, "notifications/prompts/list_changed", None)
    assert not modern.wanted(honored, "notifications/tools/list_changed", None)
    assert modern.wanted(honored, "notifications/resources/updated", {"uri": "a://1"})
    assert not modern.wanted(honored, "notifications/resources/updated", {"uri": "a://2"})


@pytest.mark.parametrize("method, found, rejected", [
    ("GET", {"mcp-protocol-version": V}, True),
    ("DELETE", {"mcp-protocol-version": V}, True),
    ("GET", {"mcp-protocol-version": V, "mcp-session-id": "s"}, False),  # a session's: legacy rules
    ("GET", {"mcp-protocol-version": "2025-11-25"}, False),
    ("GET", {}, False),
    ("POST", {"mcp-protocol-version": V}, False),
])
def test_get_and_delete_of_the_modern_era_are_405(method, found, rejected):
    if rejected:
        with pytest.raises(modern.RemoteProtocolError) as caught:
            modern.check_stream_method(method, found)
        assert caught.value.http_status == 405 and ("allow", "POST") in caught.value.headers
    else:
        modern.check_stream_method(method, found)


def test_a_listens_resource_subscriptions_obey_the_caps_of_resources_subscribe():
    """Issue 20 #3: ~300,000 short URIs in one listen were held in memory for up to an hour."""
    caps = {"resources": {"subscribe": True}}
    assert modern.honored_filter({"resourceSubscriptions": ["a://1", "a://1", "a://2"]}, caps, 3, 10) == \
        {"resourceSubscriptions": ["a://1", "a://2"]}
    with pytest.raises(modern.SubscriptionLimit) as too_many:
        modern.honored_filter({"resourceSubscriptions": ["a://1"] * 4}, caps, 3, 10)
    assert too_many.value.limit == "subscriptions" and too_many.value.code == -32602
    with pytest.raises(modern.SubscriptionLimit) as too_long:
        modern.honored_filter({"resourceSubscriptions": ["a://" + "x" * 7]}, caps, 3, 10)
    assert too_long.value.limit == "uri_bytes"
