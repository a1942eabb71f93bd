"""http: pure checks on the request head (method, Origin, Content-Type, Accept, version)."""
import json

import pytest

from mcp_transport.protocol import http, versions
from mcp_transport.protocol.errors import ErrorCode, RemoteProtocolError, TransportError
from mcp_transport.protocol.http import PostAccept


def assert_transport_error(info, status):
    exc = info.value
    assert type(exc) is TransportError
    assert isinstance(exc, RemoteProtocolError)
    assert exc.http_status == status
    assert exc.code == ErrorCode.INVALID_REQUEST
    assert exc.message


# --- Accept on POST -----------------------------------------------------------------------------

@pytest.mark.parametrize("accept, json, sse, prefers_sse", [
    # Missing or blank: both allowed, JSON preferred.
    (None, True, True, False),
    ("", True, True, False),
    ("   ", True, True, False),
    # Both, in either order: order decides between equal qualities.
    ("application/json, text/event-stream", True, True, False),
    ("text/event-stream, application/json", True, True, True),
    ("application/json,text/event-stream", True, True, False),
    ("text/event-stream,application/json", True, True, True),
    # One only (lenient: the spec says list both, we accept either).
    ("application/json", True, False, False),
    ("text/event-stream", False, True, True),
    # Wildcards
    ("*/*", True, True, False),
    ("application/*", True, False, False),
    ("text/*", False, True, True),
    ("application/*, text/*", True, True, False),
    ("text/html, */*;q=0.1", True, True, False),
    ("text/html, application/xhtml+xml, */*;q=0.8", True, True, False),
    # q-values
    ("application/json;q=0.5, text/event-stream", True, True, True),
    ("application/json, text/event-stream;q=0.5", True, True, False),
    ("text/event-stream;q=0.5, application/json", True, True, False),
    ("text/event-stream;q=0.9, application/json;q=0.9", True, True, True),
    (" application/json ; q=0.9 , text/event-stream ; q=0.9", True, True, False),
    ("application/json;q=1.0, text/event-stream;q=0.999", True, True, False),
    # q=0 means "not acceptable"
    ("application/json;q=0, text/event-stream", False, True, True),
    ("text/event-stream;q=0, application/json", True, False, False),
    ("application/json;q=0.0, text/event-stream", False, True, True),
    ("*/*;q=0, application/json", True, False, False),
    ("*/*;q=0, text/event-stream", False, True, True),
    # The most specific range decides, whatever its position.
    ("*/*, text/event-stream;q=0", True, False, False),
    ("text/*;q=0, application/json, */*", True, False, False),
    ("application/*;q=0, application/json", True, False, False),
    ("application/json;q=0, */*", False, True, True),
    # A malformed q counts as 0.
    ("application/json;q=abc, text/event-stream", False, True, True),
    # Case-insensitive media types and parameters; other parameters ignored.
    ("APPLICATION/JSON, Text/Event-Stream", True, True, False),
    ("application/json;Q=0, text/event-stream", False, True, True),
    ("application/json; charset=utf-8, text/event-stream", True, True, False),
    ("application/json;charset=utf-8;q=0.2, text/event-stream;q=0.3", True, True, True),
    # Empty list items are skipped.
    (", application/json,, text/event-stream,", True, True, False),
])
def test_negotiate_post(accept, json, sse, prefers_sse):
    assert http.negotiate_post(accept) == PostAccept(json=json, sse=sse, prefers_sse=prefers_sse)


@pytest.mark.parametrize("accept", [
    "text/html",
    "application/xml, text/plain",
    "image/*",
    "application/json;q=0",
    "text/event-stream;q=0",
    "application/json;q=0, text/event-stream;q=0",
    "*/*;q=0",
    "application/jsonx, text/event-streams",
    "application/json-seq",
    ",",
])
def test_negotiate_post_406(accept):
    with pytest.raises(TransportError) as info:
        http.negotiate_post(accept)
    assert_transport_error(info, 406)


# --- Accept on GET ------------------------------------------------------------------------------

@pytest.mark.parametrize("accept", [
    "text/event-stream",
    "application/json, text/event-stream",
    "text/event-stream;q=0.1",
    "TEXT/EVENT-STREAM",
    "*/*",
    "text/*",
    "text/html, */*;q=0.5",
])
def test_check_get_accept_ok(accept):
    assert http.check_get_accept(accept) is None


@pytest.mark.parametrize("accept", [
    None,
    "",
    "application/json",
    "text/html",
    "application/*",
    "text/event-stream;q=0",
    "*/*;q=0",
    "text/*;q=0",
    "*/*, text/event-stream;q=0",
])
def test_check_get_accept_406(accept):
    with pytest.raises(TransportError) as info:
        http.check_get_accept(accept)
    assert_transport_error(info, 406)


# --- Content-Type -------------------------------------------------------------------------------

@pytest.mark.parametrize("content_type", [
    None,
    "application/json",
    "application/json; charset=utf-8",
    "application/json;charset=UTF-8",
    "APPLICATION/JSON",
    "Application/Json; Charset=utf-8",
    " application/json ",
])
def test_check_content_type_ok(content_type):
    assert http.check_content_type(content_type) is None


@pytest.mark.parametrize("content_type", [
    "text/plain",
    "text/plain; charset=utf-8",
    "",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/json-seq",
    "application/jsonp",
    "text/json",
    "application/*",
])
def test_check_content_type_415(content_type):
    with pytest.raises(TransportError) as info:
        http.check_content_type(content_type)
    assert_transport_error(info, 415)


# --- Method -------------------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
def test_check_method_ok(method):
    assert http.check_method(method) is None


@pytest.mark.parametrize("method", ["PUT", "PATCH", "HEAD", "OPTIONS", "TRACE", "CONNECT",
                                    "get", "post", ""])
def test_check_method_405(method):
    with pytest.raises(TransportError) as info:
        http.check_method(method)
    assert_transport_error(info, 405)
    assert ("allow", "GET, POST, DELETE") in info.value.headers
    assert info.value.headers == (("allow", "GET, POST, DELETE"),)


# --- Origin -------------------------------------------------------------------------------------

ALLOWED = ["https://app.example.com", "http://partner.example:8080"]


@pytest.mark.parametrize("origin, allowed, allow_loopback", [
    # Missing Origin: a non-browser client.
    (None, [], True),
    (None, [], False),
    # Loopback, any port, http or https.
    ("http://localhost", [], True),
    ("http://localhost:3000", [], True),
    ("https://localhost:8443", [], True),
    ("http://127.0.0.1", [], True),
    ("http://127.0.0.1:6274", [], True),
    ("https://127.0.0.1:1", [], True),
    ("http://[::1]", [], True),
    ("http://[::1]:8080", [], True),
    ("https://[::1]:65535", [], True),
    ("http://LOCALHOST:3000", [], True),
    ("http://localhost:3000/", [], True),
    (" http://localhost:3000 ", [], True),
    # The allow-list matches exactly.
    ("https://app.example.com", ALLOWED, True),
    ("http://partner.example:8080", ALLOWED, True),
    ("https://app.example.com", ALLOWED, False),
    ("https://app.example.com/", ALLOWED, True),
    ("http://localhost:3000", ["http://localhost:3000"], False),
    # "*" allows everything, even garbage.
    ("https://evil.example", ["*"], True),
    ("null", ["*"], False),
    ("not a url", ["*"], True),
    # Any iterable will do, read once.
    ("https://app.example.com", iter(ALLOWED), True),
    ("https://app.example.com", (o for o in ALLOWED), False),
    ("https://app.example.com", tuple(ALLOWED), False),
    ("https://app.example.com", frozenset(ALLOWED), False),
    ("https://app.example.com", "https://app.example.com", False),
])
def test_check_origin_ok(origin, allowed, allow_loopback):
    assert http.check_origin(origin, allowed, allow_loopback=allow_loopback) is None


@pytest.mark.parametrize("origin, allowed, allow_loopback", [
    ("https://evil.example", [], True),
    ("https://evil.example", ALLOWED, True),
    ("http://evil.example:3000", [], True),
    # Loopback look-alikes
    ("http://localhost.evil.example", [], True),
    ("http://127.0.0.1.nip.io", [], True),
    ("http://127.0.0.1@evil.example", [], True),
    ("http://localhost:80@evil.example", [], True),
    ("http://evil.example#@localhost", [], True),
    ("http://127.0.0.2", [], True),
    ("http://0.0.0.0:8000", [], True),
    ("http://[::2]", [], True),
    ("ws://localhost", [], True),
    ("ftp://localhost", [], True),
    ("file://localhost", [], True),
    ("localhost:3000", [], True),
    # Loopback turned off
    ("http://localhost:3000", [], False),
    ("http://127.0.0.1", [], False),
    ("http://[::1]:8080", ALLOWED, False),
    # Allow-list entries match exactly: scheme, host and port.
    ("http://app.example.com", ALLOWED, True),
    ("https://app.example.com:443", ALLOWED, True),
    ("https://app.example.com:8443", ALLOWED, True),
    ("https://sub.app.example.com", ALLOWED, True),
    ("https://app.example.com.evil.example", ALLOWED, True),
    ("http://partner.example", ALLOWED, True),
    ("https://app.example", ALLOWED, True),
    # A single string is one origin, not a set of substrings.
    ("https://app.example", "https://app.example.com", True),
    ("h", "https://app.example.com", True),
    # Malformed
    ("null", [], True),
    ("", [], True),
    ("   ", [], True),
    ("not a url", [], True),
    ("http://[::1", [], True),
    ("http://[not-ipv6]", [], True),
    ("http://", [], True),
    ("*", [], True),
])
def test_check_origin_403(origin, allowed, allow_loopback):
    with pytest.raises(TransportError) as info:
        http.check_origin(origin, allowed, allow_loopback=allow_loopback)
    assert_transport_error(info, 403)


def test_check_origin_defaults_to_allowing_loopback():
    assert http.check_origin("http://localhost:5173", []) is None


@pytest.mark.parametrize("origin, expected", [
    ("http://localhost", True),
    ("https://127.0.0.1:9", True),
    ("http://[::1]:1", True),
    ("http://localhost.example", False),
    ("ws://localhost", False),
    ("http://[::1", False),
    ("", False),
])
def test_is_loopback_origin(origin, expected):
    assert http.is_loopback_origin(origin) is expected


# --- Body size ----------------------------------------------------------------------------------

@pytest.mark.parametrize("size, limit", [(0, 0), (0, 10), (9, 10), (10, 10), (4 << 20, 4 << 20)])
def test_check_body_size_ok(size, limit):
    assert http.check_body_size(size, limit) is None


@pytest.mark.parametrize("size, limit", [(1, 0), (11, 10), ((4 << 20) + 1, 4 << 20)])
def test_check_body_size_413(size, limit):
    with pytest.raises(TransportError) as info:
        http.check_body_size(size, limit)
    assert_transport_error(info, 413)


# --- MCP-Protocol-Version -----------------------------------------------------------------------

@pytest.mark.parametrize("negotiated", versions.SUPPORTED)
def test_request_version_missing_means_negotiated(negotiated):
    assert http.request_version(None, negotiated) == negotiated


@pytest.mark.parametrize("negotiated", versions.SUPPORTED)
@pytest.mark.parametrize("header", versions.SUPPORTED)
def test_request_version_accepts_every_supported_version(header, negotiated):
    assert http.request_version(header, negotiated) == header


def test_request_version_strips_whitespace():
    assert http.request_version(" 2025-06-18 ", "2025-11-25") == "2025-06-18"


@pytest.mark.parametrize("header", [
    "1999-01-01", "banana", "2026-07-28", "2024-11-05", "", "2025-11-25x", "2025/11/25",
    "2025-11-25, 2025-06-18",
])
def test_request_version_400(header):
    with pytest.raises(TransportError) as info:
        http.request_version(header, "2025-11-25")
    assert_transport_error(info, 400)


# --- Headers ------------------------------------------------------------------------------------

@pytest.mark.parametrize("raw, expected", [
    ([], {}),
    ([(b"Accept", b"application/json")], {"accept": "application/json"}),
    ([(b"Content-Type", b"application/json"), (b"MCP-Session-Id", b"abc")],
     {"content-type": "application/json", "mcp-session-id": "abc"}),
    ([(b"Accept", b"application/json"), (b"ACCEPT", b"text/event-stream"),
      (b"accept", b"*/*")],
     {"accept": "application/json, text/event-stream, */*"}),
    ([(b"x-a", b"1"), (b"x-b", b"2"), (b"X-A", b"3")], {"x-a": "1, 3", "x-b": "2"}),
    ([(b"X-Latin", b"caf\xe9")], {"x-latin": "caf\u00e9"}),
    ([(b"X-Empty", b"")], {"x-empty": ""}),
])
def test_read_headers(raw, expected):
    assert http.read_headers(raw) == expected


# -- limits: the client's address, refusals written before the application -----------------

def test_client_address_is_the_peer_without_trusted_proxies():
    assert http.client_address("203.0.113.7", "198.51.100.1", []) == "203.0.113.7"


def test_client_address_ignores_forwarded_for_from_an_untrusted_peer():
    assert http.client_address("203.0.113.7", "198.51.100.1", ["10.0.0.0/8"]) == "203.0.113.7"


def test_client_address_takes_the_rightmost_untrusted_hop_from_a_trusted_proxy():
    # The client wrote "1.2.3.4" itself; the proxies appended what they saw.
    forwarded = "1.2.3.4, 198.51.100.9, 10.0.0.5"
    assert http.client_address("10.0.0.2", forwarded, ["10.0.0.0/8"]) == "198.51.100.9"


def test_client_address_keeps_the_peer_when_forwarded_for_is_garbage():
    assert http.client_address("10.0.0.2", "not-an-ip", ["10.0.0.0/8"]) == "10.0.0.2"
    assert http.client_address("10.0.0.2", "10.0.0.3", ["10.0.0.0/8"]) == "10.0.0.2"
    assert http.client_address(None, None, []) == "unknown"


def test_valid_networks():
    assert http.valid_networks(["10.0.0.0/8", "::1", "192.168.1.1"])
    assert not http.valid_networks("10.0.0.0/8")
    assert not http.valid_networks(["10.0.0.0/33"])


def test_refusal_response_is_a_whole_closing_json_response():
    response = http.refusal_response(431, "Too many headers.")
    head, _, body = response.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")
    assert b"Connection: close" in head and b"Content-Length: %d" % len(body) in head
    assert json.loads(body) == {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Too many headers."}}


@pytest.mark.parametrize("address, network", [
    ("192.0.2.1", "192.0.2.1"), ("2001:db8::1", "2001:db8::/64"), ("2001:db8:0:0:ffff:1:2:3", "2001:db8::/64"),
    ("2001:db8:0:1::1", "2001:db8:0:1::/64"), ("::ffff:192.0.2.7", "192.0.2.7"), ("unknown", "unknown"),
])
def test_the_network_a_client_address_counts_in(address, network):
    """Limits count an IPv6 client by its /64: one host may take any of its 2**64 addresses."""
    assert http.network_of(address) == network
