"""Origin and Host validation over raw HTTP (checklist I1, I2, I5): DNS-rebinding protection.

Both checks run before anything else (transports/endpoint.py: Origin 403 -> Host 400 -> method
-> ... -> session), so the rejected requests below carry a bogus session id and still get
403/400, never the 404 that would tell a client to re-initialize.
"""
import secrets

import pytest

from mcp_transport.testing import HttpClient, assert_transport_error

JSON = "application/json"
TIMEOUT = 10
BOGUS_SESSION = {"Mcp-Session-Id": secrets.token_urlsafe(24), "MCP-Protocol-Version": "2025-11-25"}


def init_message(client):
    return client.message("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                         "clientInfo": {"name": "t", "version": "0"}})


def initialize(client, headers):
    return client.request("POST", init_message(client), headers, session=False, timeout=TIMEOUT)


def send(client, kind, headers):
    """initialize (no session), or a session request with a bogus session id."""
    if kind == "initialize":
        return initialize(client, headers)
    if kind == "POST":
        return client.request("POST", client.message("tools/list"), {**BOGUS_SESSION, **headers}, timeout=TIMEOUT)
    return client.request(kind, None, {**BOGUS_SESSION, **headers}, timeout=TIMEOUT)


KINDS = ["initialize", "POST", "GET", "DELETE"]


@pytest.fixture(scope="module")
def allowlisting_server(start_server):
    server = start_server(MCP_ALLOWED_ORIGINS="https://app.example.com", DJANGO_ALLOWED_HOSTS="mcp.example.com")
    yield server
    server.stop()


# --- I1 / I2: Origin -------------------------------------------------------------------------------

# I1: a foreign Origin -> 403 on POST, GET and DELETE, checked before the session.
@pytest.mark.parametrize("kind", KINDS)
def test_foreign_origin_is_403_before_session_lookup(client, kind):
    assert_transport_error(send(client, kind, {"Origin": "http://evil.example.com"}), 403)


# I1: origins that only look local are foreign.
@pytest.mark.parametrize("origin", [
    "null",
    "http://localhost.evil.example.com",
    "http://127.0.0.1.nip.io:8000",
    "http://localhost@evil.example.com",
    "http://evil.example.com/localhost",
    "file://localhost",
    "ftp://127.0.0.1",
])
def test_lookalike_origin_is_403(client, origin):
    assert_transport_error(initialize(client, {"Origin": origin}), 403)


# I1 (loopback allowed by default): a browser page on this machine may call the endpoint.
@pytest.mark.parametrize("origin", ["http://localhost:1234", "http://127.0.0.1:5", "http://[::1]:8",
                                    "https://localhost", "http://LOCALHOST:3000"])
def test_loopback_origin_is_allowed(client, origin):
    reply = initialize(client, {"Origin": origin})
    assert reply.status == 200, reply.body
    client.session_id = reply.headers["mcp-session-id"]
    reply = client.request("POST", client.message("tools/list"), {"Origin": origin}, timeout=TIMEOUT)
    assert reply.status == 200, reply.body


# I2: no Origin (a non-browser client) -> allowed.
def test_missing_origin_is_allowed(client):
    assert initialize(client, {"Origin": None}).status == 200


# I1 + MCP_ALLOWED_ORIGINS: an allow-listed origin is served on every method.
def test_allowlisted_origin_is_allowed(allowlisting_server):
    client = HttpClient(allowlisting_server.url)
    origin = {"Origin": "https://app.example.com"}
    reply = initialize(client, origin)
    assert reply.status == 200, reply.body
    client.session_id = reply.headers["mcp-session-id"]
    assert client.request("POST", client.message("tools/list"), origin, timeout=TIMEOUT).status == 200
    assert client.request("DELETE", None, origin, timeout=TIMEOUT).status == 200


# I1 + MCP_ALLOWED_ORIGINS: the allow-list is exact; anything else is still 403.
@pytest.mark.parametrize("origin", [
    "https://evil.example.com",
    "http://app.example.com",              # another scheme
    "https://app.example.com:8443",        # another port
    "https://app.example.com.evil.example.com",
    "https://evil.app.example.com",
    "https://app.example.co",              # a prefix of the allowed origin
])
@pytest.mark.parametrize("kind", KINDS)
def test_origin_not_on_allowlist_is_403(allowlisting_server, kind, origin):
    assert_transport_error(send(HttpClient(allowlisting_server.url), kind, {"Origin": origin}), 403)


# I1: an allow-list adds to the loopback origins, it does not replace them.
def test_loopback_origin_is_still_allowed_with_an_allowlist(allowlisting_server):
    assert initialize(HttpClient(allowlisting_server.url), {"Origin": "http://localhost:1234"}).status == 200


# --- I5: Host ------------------------------------------------------------------------------------

# I5: a foreign Host -> 400 (not 404), checked before the session.
@pytest.mark.parametrize("kind", KINDS)
def test_foreign_host_is_400_before_session_lookup(client, kind):
    assert_transport_error(send(client, kind, {"Host": "evil.example.com"}), 400)


# I5: hosts that only look local are foreign.
@pytest.mark.parametrize("host", ["evil.example.com:{port}", "127.0.0.1.nip.io:{port}",
                                  "localhost.evil.example.com", "127.0.0.2:{port}", ""])
def test_lookalike_host_is_400(client, mcp_server, host):
    assert_transport_error(initialize(client, {"Host": host.format(port=mcp_server.port)}), 400)


# I5: the server's own loopback names pass.
@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}", "127.0.0.1"])
def test_local_host_is_allowed(client, mcp_server, host):
    assert initialize(client, {"Host": host.format(port=mcp_server.port)}).status == 200


# I5 + DJANGO_ALLOWED_HOSTS: an extra allowed host passes.
def test_configured_host_is_allowed(allowlisting_server):
    reply = initialize(HttpClient(allowlisting_server.url), {"Host": "mcp.example.com"})
    assert reply.status == 200, reply.body


# I5: a rebinding attack sends both; the Origin check comes first (403).
def test_foreign_origin_and_host_is_403(client):
    reply = initialize(client, {"Origin": "http://evil.example.com", "Host": "evil.example.com"})
    assert_transport_error(reply, 403)


# I5: the matching local Host and Origin pass.
def test_matching_local_origin_and_host_is_allowed(client, mcp_server):
    port = mcp_server.port
    reply = initialize(client, {"Origin": f"http://127.0.0.1:{port}", "Host": f"127.0.0.1:{port}"})
    assert reply.status == 200
