"""CORS for browser MCP clients on a real daphne (django-cors-headers, mcp_transport/cors.py):
the origins of MCP_TRANSPORT["ALLOWED_ORIGINS"] (and loopback) get preflights answered and the
headers a browser script needs, on /mcp and on the OAuth endpoints; other origins get none (and
403 from the endpoint), pages such as the admin get none, and clients without an Origin see no
change."""
import json

import httpx2
import pytest

from .test_auth import new_token

ALLOWED = "https://app.example.com"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "browser", "version": "0"}}}


@pytest.fixture(scope="module")
def cors_server(start_server):
    return start_server(MCP_AUTH="on", MCP_ALLOWED_ORIGINS=ALLOWED)


def origin_of(server):
    return server.url.rsplit("/mcp", 1)[0]


def preflight(url, origin, method="POST", headers="authorization, content-type, mcp-session-id, mcp-protocol-version"):
    return httpx2.options(url, headers={"Origin": origin, "Access-Control-Request-Method": method,
                                        "Access-Control-Request-Headers": headers})


@pytest.mark.parametrize("origin", [ALLOWED, "http://localhost:5173", "http://127.0.0.1:3000"])
def test_the_endpoint_answers_preflights_of_allowed_origins(cors_server, origin):
    reply = preflight(cors_server.url, origin)
    assert reply.status_code == 200
    assert reply.headers["access-control-allow-origin"] == origin
    allowed = {h.strip() for h in reply.headers["access-control-allow-headers"].split(",")}
    assert {"authorization", "content-type", "mcp-session-id", "mcp-protocol-version", "mcp-method", "mcp-name",
            "last-event-id"} <= allowed
    assert {"GET", "POST", "DELETE"} <= {m.strip() for m in reply.headers["access-control-allow-methods"].split(",")}


def test_other_origins_get_403_and_no_cors_headers(cors_server):
    for reply in (preflight(cors_server.url, "https://evil.example"),
                  httpx2.post(cors_server.url, json=INIT, headers={"Origin": "https://evil.example"})):
        assert reply.status_code == 403
        assert "access-control-allow-origin" not in reply.headers


def test_a_browser_reads_the_challenge_and_the_session_id(cors_server, server_env):
    headers = {"Origin": ALLOWED, "Accept": "application/json, text/event-stream"}
    refused = httpx2.post(cors_server.url, json=INIT, headers=headers)
    assert refused.status_code == 401
    assert refused.headers["access-control-allow-origin"] == ALLOWED
    exposed = {h.strip() for h in refused.headers["access-control-expose-headers"].split(",")}
    assert {"www-authenticate", "mcp-session-id"} <= exposed
    token = new_token(server_env, "cors-user")
    headers["Authorization"] = f"Bearer {token}"
    opened = httpx2.post(cors_server.url, json=INIT, headers=headers)
    assert opened.status_code == 200
    assert opened.headers["access-control-allow-origin"] == ALLOWED and opened.headers["mcp-session-id"]
    # The resumable GET stream carries them too (read its headers, then close it).
    headers.update({"Mcp-Session-Id": opened.headers["mcp-session-id"], "Accept": "text/event-stream",
                    "MCP-Protocol-Version": "2025-11-25"})
    with httpx2.stream("GET", cors_server.url, headers=headers, timeout=60) as stream:
        assert stream.status_code == 200
        assert stream.headers["access-control-allow-origin"] == ALLOWED


def test_no_origin_no_cors_headers(cors_server):
    reply = httpx2.post(cors_server.url, json=INIT)
    assert reply.status_code == 401
    assert not [name for name in reply.headers if name.startswith("access-control-")]


@pytest.mark.parametrize("path", ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-authorization-server"])
def test_metadata_is_readable_from_allowed_origins_only(cors_server, path):
    url = origin_of(cors_server) + path
    allowed = httpx2.get(url, headers={"Origin": ALLOWED})
    assert allowed.status_code == 200 and allowed.headers["access-control-allow-origin"] == ALLOWED
    assert json.loads(allowed.content)
    other = httpx2.get(url, headers={"Origin": "https://evil.example"})
    assert other.status_code == 200 and "access-control-allow-origin" not in other.headers


def test_token_and_registration_endpoints_answer_preflights(cors_server):
    for path in ("/o/token/", "/o/register/"):
        reply = preflight(origin_of(cors_server) + path, ALLOWED, headers="content-type")
        assert reply.status_code == 200, path
        assert reply.headers["access-control-allow-origin"] == ALLOWED
    registered = httpx2.post(origin_of(cors_server) + "/o/register/", json={"redirect_uris": ["https://app.example.com/cb"]},
                             headers={"Origin": ALLOWED})
    assert registered.status_code == 201 and registered.headers["access-control-allow-origin"] == ALLOWED


def test_pages_get_no_cors_headers(cors_server):
    for path in ("/admin/login/", "/o/login/"):
        reply = httpx2.get(origin_of(cors_server) + path, headers={"Origin": ALLOWED})
        assert reply.status_code == 200
        assert "access-control-allow-origin" not in reply.headers, path
