"""The example project as its own authorization server (mcp_transport.oauth), end to end on a
real daphne with ``MCP_AUTH=on``: the official SDK client's OAuth provider (mcp 2.3.0
``OAuthClientProvider``) discovers the authorization server from the 401, registers itself
(RFC 7591), sends the user through login and consent with PKCE, gets a token and calls tools in
both eras. The browser is the test kit's
``mcp_transport.testing.oauth.SignIn``: an HTTP client holding the Django session cookie that signs
in on the login form and posts the consent form as a person's browser would. Then the registration
endpoint's refusals and bounds."""
import json
import subprocess
import sys

import httpx2
import pytest

from mcp_transport.testing import HttpClient
from mcp_transport.testing.oauth import MemoryTokenStorage, authorized_client, oauth_provider

from .test_auth import ROOT

PASSWORD = "a-long-password-for-oauth-tests"


@pytest.fixture(scope="module")
def oauth_server(start_server):
    # A tight registration bound, to test it without making thousands of clients.
    # The loopback peer is a trusted proxy, so a test can register from an address of its own.
    return start_server(MCP_AUTH="on", MCP_TRUSTED_PROXIES="127.0.0.1",
                        MCP_TRANSPORT_JSON=json.dumps({"OAUTH_REGISTRATIONS_PER_ADDRESS": 6}))


@pytest.fixture(scope="module")
def people(server_env):
    code = ("from django.contrib.auth.models import User\n"
            "for name in ('olive', 'oscar'):\n"
            "    user, _ = User.objects.get_or_create(username=name)\n"
            f"    user.set_password({PASSWORD!r}); user.save()\n")
    subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT,
                   env={**__import__("os").environ, **server_env}, check=True, capture_output=True)
    return "olive", "oscar"


def provider(server, username, storage):
    return oauth_provider(server.url, username, PASSWORD, storage)


def sdk_client(server, auth, mode):
    return authorized_client(server.url, auth=auth, mode=mode)


@pytest.mark.asyncio
@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
async def test_the_sdk_oauth_provider_runs_the_whole_flow_in_both_eras(oauth_server, people):
    olive, oscar = people
    storage = MemoryTokenStorage()
    auth = provider(oauth_server, olive, storage)
    async with sdk_client(oauth_server, auth, "auto") as client:  # 2026-07-28
        assert client.protocol_version == "2026-07-28"
        assert "echo" in {tool.name for tool in (await client.list_tools()).tools}
        assert (await client.call_tool("whoami", {})).content[0].text == olive
    # Registered once (a public client with PKCE), then the token is reused: no second login.
    assert storage.client_info.token_endpoint_auth_method == "none"
    assert storage.tokens.access_token and storage.tokens.refresh_token
    async with sdk_client(oauth_server, auth, "legacy") as client:
        assert client.protocol_version == "2025-11-25"
        assert (await client.call_tool("echo", {"text": "hi"})).structured_content == {"result": "hi"}
        assert (await client.call_tool("whoami", {})).content[0].text == olive

    # The second person's client gets its own token; each sees only its own sessions.
    other = MemoryTokenStorage()
    async with sdk_client(oauth_server, provider(oauth_server, oscar, other), "legacy") as client:
        assert (await client.call_tool("whoami", {})).content[0].text == oscar
    mine = HttpClient(oauth_server.url, token=storage.tokens.access_token)
    mine.initialize()
    theirs = mine.with_token(other.tokens.access_token)
    assert theirs.request("POST", theirs.message("tools/list")).status == 404
    assert theirs.request("GET", headers={"Accept": "text/event-stream"}).status == 404
    assert mine.request("POST", mine.message("tools/list")).json["result"]["tools"]


# -- metadata and registration -----------------------------------------------------------------

def origin_of(server):
    return server.url.rsplit("/mcp", 1)[0]


def test_authorization_server_metadata_matches_the_protected_resource_metadata(oauth_server):
    origin = origin_of(oauth_server)
    resource = httpx2.get(f"{origin}/.well-known/oauth-protected-resource/mcp").json()
    issuer = resource["authorization_servers"][0]
    metadata = httpx2.get(f"{issuer}/.well-known/oauth-authorization-server").json()
    assert metadata["issuer"] == issuer == origin
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert metadata["response_types_supported"] == ["code"]
    assert "authorization_code" in metadata["grant_types_supported"]
    assert "none" in metadata["token_endpoint_auth_methods_supported"]
    assert "none" not in metadata.get("introspection_endpoint_auth_methods_supported", [])
    for endpoint in ("authorization_endpoint", "token_endpoint", "registration_endpoint"):
        assert metadata[endpoint].startswith(origin + "/o/")


def register(server, address="192.0.2.1", **metadata):
    return httpx2.post(f"{origin_of(server)}/o/register/", json=metadata, headers={"X-Forwarded-For": address})


@pytest.mark.parametrize("uri", [
    "http://example.com/callback",          # plain http off loopback
    "https://example.com/callback#frag",    # a fragment
    "javascript:alert(1)", "ftp://example.com/x", "https://user:pw@example.com/cb", "not a url", 7,
    "https://example.com/c\u0000b",        # a control character (NUL: a 500 on PostgreSQL)
    "https://ex\u00e4mple.com/cb",          # not ASCII (a look-alike host; punycode is fine)
])
def test_registration_refuses_unsafe_redirect_uris(oauth_server, uri):
    reply = register(oauth_server, redirect_uris=[uri], client_name="bad")
    assert reply.status_code == 400
    assert reply.json()["error"] == "invalid_redirect_uri"
    assert reply.json()["error_description"]


@pytest.mark.parametrize("metadata", [
    {"redirect_uris": []}, {"client_name": "no uris"}, {"redirect_uris": "https://a.example/cb"},
    {"redirect_uris": ["https://a.example/cb"], "grant_types": ["client_credentials"]},
    {"redirect_uris": ["https://a.example/cb"], "grant_types": ["implicit"]},
    {"redirect_uris": ["https://a.example/cb"], "response_types": ["token"]},
    {"redirect_uris": ["https://a.example/cb"], "client_name": None},  # was a 500
    {"redirect_uris": ["https://a.example/cb"], "client_name": {"a": 1}},  # was stored as "{'a': 1}"
])
def test_registration_refuses_metadata_of_anything_but_a_public_code_client(oauth_server, metadata):
    reply = register(oauth_server, **metadata)
    assert reply.status_code == 400
    assert reply.json()["error"] in ("invalid_redirect_uri", "invalid_client_metadata")


def test_registration_refuses_a_body_that_is_not_a_json_object(oauth_server):
    for body in (b"[1]", b"{", b"x" * 20000):
        reply = httpx2.post(f"{origin_of(oauth_server)}/o/register/", content=body,
                            headers={"Content-Type": "application/json"})
        assert reply.status_code == 400
        assert reply.json()["error"] == "invalid_client_metadata"


def test_a_confidential_request_is_registered_as_a_public_client_and_bounded_per_address(oauth_server):
    reply = register(oauth_server, "198.51.100.9", redirect_uris=["https://app.example/cb", "http://[::1]:8080/cb"],
                     token_endpoint_auth_method="client_secret_post")
    assert reply.status_code == 201, reply.text
    assert reply.json()["token_endpoint_auth_method"] == "none"
    assert "client_secret" not in reply.json()
    replies = [register(oauth_server, "198.51.100.9", redirect_uris=["http://localhost:9/cb"]) for _ in range(6)]
    assert [r.status_code for r in replies] == [201] * 5 + [429]
    assert register(oauth_server, "198.51.100.10", redirect_uris=["http://localhost:9/cb"]).status_code == 201
    assert replies[-1].headers["Retry-After"]
    assert replies[-1].json()["error"] == "temporarily_unavailable"


# -- RFC 7592 updates and every other path that changes a client: the same policy ---------------

def registered(server, address):
    reply = register(server, address, client_name="honest", redirect_uris=["https://app.example/cb"])
    assert reply.status_code == 201, reply.text
    return reply.json()


def update(client, **metadata):
    return httpx2.put(client["registration_client_uri"], json=metadata,
                      headers={"Authorization": f"Bearer {client['registration_access_token']}"})


@pytest.mark.parametrize("metadata, error", [
    ({"redirect_uris": ["http://attacker.example/cb"]}, "invalid_redirect_uri"),
    ({"redirect_uris": [f"https://app.example/cb{n}" for n in range(16)]}, "invalid_redirect_uri"),
    ({"redirect_uris": ["https://user:secret@app.example/cb"]}, "invalid_redirect_uri"),
    ({"redirect_uris": ["https://app.example/cb"], "grant_types": ["client_credentials"]}, "invalid_client_metadata"),
    ({"redirect_uris": ["https://app.example/cb"], "grant_types": ["implicit"]}, "invalid_client_metadata"),
    ({"redirect_uris": ["https://app.example/cb"], "grant_types": [{}]}, "invalid_client_metadata"),
])
def test_an_update_with_the_registration_token_obeys_the_registration_policy(oauth_server, metadata, error):
    client = registered(oauth_server, "203.0.113.50")
    reply = update(client, client_name="evil", **metadata)
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"] == error
    # Nothing changed: the client reads back as it was registered.
    now = httpx2.get(client["registration_client_uri"],
                     headers={"Authorization": f"Bearer {client['registration_access_token']}"}).json()
    assert (now["client_name"], now["redirect_uris"]) == ("honest", ["https://app.example/cb"])


def test_an_update_asking_for_a_confidential_client_keeps_it_public(oauth_server):
    client = registered(oauth_server, "203.0.113.51")
    reply = update(client, client_name="renamed", redirect_uris=["http://127.0.0.1:5000/cb"],
                   token_endpoint_auth_method="client_secret_basic")
    assert reply.status_code == 200, reply.text
    assert reply.json()["token_endpoint_auth_method"] == "none"
    assert "client_secret" not in reply.json()
    assert reply.json()["redirect_uris"] == ["http://127.0.0.1:5000/cb"]


def test_a_grant_type_that_is_not_a_string_is_bad_metadata_not_a_500(oauth_server):
    reply = register(oauth_server, "203.0.113.52", redirect_uris=["https://app.example/cb"], grant_types=[{}])
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"] == "invalid_client_metadata"


@pytest.mark.asyncio
@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
async def test_the_sdk_oauth_provider_runs_the_whole_flow_on_the_http_sse_transport(oauth_server, people):
    """The 2024-11-05 HTTP+SSE pair under OAuth: discovery from the /sse 401 (its metadata is
    served), a token for the /sse resource, and every POST to /messages accepted with it."""
    from mcp import Client
    from mcp.client.sse import sse_client

    olive, _ = people
    url = f"{origin_of(oauth_server)}/sse"
    storage = MemoryTokenStorage()
    async with Client(sse_client(url, auth=provider_for(url, olive, storage)), mode="legacy") as client:
        assert (await client.call_tool("whoami", {})).content[0].text == olive
        assert (await client.call_tool("echo", {"text": "hi"})).structured_content == {"result": "hi"}


def provider_for(url, username, storage):
    return oauth_provider(url, username, PASSWORD, storage)
