"""The Server Card (SEP-2127) on real daphne processes: docs/server-card.md's settings give the
page's card; two processes give the same card and ETag and each answers 304 to the other's tag;
the card agrees with initialize and server/discover as the official SDK client sees them, and
every protocol version it lists is served; no token needed with AUTH on, CORS for any origin."""
import http.client
import json
import re
from pathlib import Path

import pytest
from mcp import Client

from mcp_transport.testing import HttpClient, ModernClient

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "server-card.md").read_text()
ALLOWED = "https://app.example.com"
HOST = "mcp.example.com"
pytestmark = [pytest.mark.filterwarnings("ignore:The logging capability is deprecated")]


def page_block(name: str) -> str:
    return re.search(rf"<!-- server-card: {name} -->\n```\w+\n(.*?)\n```", PAGE, re.S).group(1)


def documented_settings() -> dict:
    namespace = {}
    exec(page_block("settings"), namespace)  # the page's block as a settings.py runs it
    return namespace["MCP_TRANSPORT"]


@pytest.fixture(scope="module")
def pair(start_server):
    """Two processes of one deployment: the page's settings, and the Host a proxy would send."""
    env = {"MCP_TRANSPORT_JSON": json.dumps(documented_settings()), "DJANGO_ALLOWED_HOSTS": HOST}
    return start_server(**env), start_server(**env)


@pytest.fixture(scope="module")
def guarded(start_server):
    return start_server(MCP_AUTH="on", MCP_ALLOWED_ORIGINS=ALLOWED,
                        MCP_TRANSPORT_JSON=json.dumps(documented_settings()))


def fetch(server, method="GET", headers=None, path="/mcp/server-card"):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        connection.request(method, path, headers=headers or {})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def card_of(server, headers=None) -> tuple:
    status, headers, body = fetch(server, headers=headers)
    assert status == 200, (status, body)
    assert headers["content-type"] == "application/mcp-server-card+json"
    return json.loads(body), headers, body


def test_the_documented_settings_give_the_documented_card_without_a_token(guarded):
    card, headers, _ = card_of(guarded)
    expected = json.loads(page_block("card").replace("https://mcp.example.com/mcp", guarded.url))
    assert card == expected
    # Authorization is really on: the endpoint refuses the same client, and names the same URL.
    refused = HttpClient(guarded.url).request("POST", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert refused.status == 401
    status, _, body = fetch(guarded, path="/.well-known/oauth-protected-resource/mcp")
    assert status == 200 and json.loads(body)["resource"] == card["remotes"][0]["url"] == guarded.url


def test_the_card_names_its_own_endpoint_and_says_how_to_cache_it(pair):
    for server in pair:
        card, headers, _ = card_of(server)
        assert card["remotes"] == [{"type": "streamable-http", "url": server.url,
                                    "supportedProtocolVersions": ["2026-07-28", "2025-11-25", "2025-06-18",
                                                                  "2025-03-26"]}]
        assert not {"tools", "resources", "prompts", "capabilities"} & set(card)
        assert headers["cache-control"] == "public, max-age=3600"
        assert headers["access-control-allow-origin"] == "*"
        assert re.fullmatch(r'"[0-9a-f]{32}"', headers["etag"])


def test_two_processes_give_the_same_card_and_each_honours_the_others_etag(pair):
    first, second = pair
    _, first_headers, first_body = card_of(first, {"Host": HOST})
    card, second_headers, second_body = card_of(second, {"Host": HOST})
    assert first_body == second_body and card["remotes"][0]["url"] == f"http://{HOST}/mcp"
    etag = first_headers["etag"]
    assert second_headers["etag"] == etag
    for server, validator in ((second, etag), (first, second_headers["etag"]), (second, f'"other", W/{etag}'),
                              (first, "*")):
        status, headers, body = fetch(server, headers={"Host": HOST, "If-None-Match": validator})
        assert (status, body) == (304, b""), validator
        assert headers["etag"] == etag and headers["cache-control"] == "public, max-age=3600"
        assert headers["access-control-allow-origin"] == "*"  # a script reading the 304 passes CORS too
    # Another Host is another card (its URL), so the tag of this one does not match it.
    status, headers, _ = fetch(second, headers={"If-None-Match": etag})
    assert status == 200 and headers["etag"] != etag
    status, _, _ = fetch(second, headers={"Host": HOST, "If-None-Match": '"stale"'})
    assert status == 200


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_card_agrees_with_what_the_sdk_client_sees_once_connected(pair, mode):
    card, _, _ = card_of(pair[0])
    async with Client(pair[0].url, mode=mode) as client:  # legacy: initialize; auto: server/discover
        info = client.server_info.model_dump(by_alias=True, exclude_none=True)
        version = client.protocol_version
    assert {key: info.get(key) for key in ("name", "version", "title", "description", "websiteUrl", "icons")} == \
        {key: card[key] for key in ("name", "version", "title", "description", "websiteUrl", "icons")}
    assert version in card["remotes"][0]["supportedProtocolVersions"]


def test_every_version_the_card_lists_is_served(pair):
    card, _, _ = card_of(pair[1])
    for version in card["remotes"][0]["supportedProtocolVersions"]:
        if version == ModernClient.VERSION:
            reply = ModernClient(pair[1].url).post("server/discover")
            assert reply.status == 200 and version in reply.json["result"]["supportedVersions"]
            info = reply.json["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]
        else:
            reply = HttpClient(pair[1].url).initialize(version=version)
            assert reply.json["result"]["protocolVersion"] == version
            info = reply.json["result"]["serverInfo"]
        assert (info["name"], info["version"], info["description"]) == \
            (card["name"], card["version"], card["description"])


def test_any_origin_may_read_the_card_while_the_endpoint_keeps_its_own(guarded):
    preflight = {"Origin": "https://elsewhere.example", "Access-Control-Request-Method": "GET",
                 "Access-Control-Request-Headers": "if-none-match"}
    status, headers, _ = fetch(guarded, "OPTIONS", preflight)
    assert status == 204 and headers["access-control-allow-origin"] == "*"
    assert "if-none-match" in headers["access-control-allow-headers"].lower()
    assert headers["access-control-allow-methods"] == "GET"
    for origin in ("https://elsewhere.example", ALLOWED):
        _, headers, _ = card_of(guarded, {"Origin": origin})
        assert headers["access-control-allow-origin"] == "*" and headers["access-control-expose-headers"] == "ETag"
    refused = HttpClient(guarded.url).request("POST", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                              headers={"Origin": "https://elsewhere.example"})
    assert refused.status == 403


def test_other_methods_and_hosts_are_refused_clearly(pair):
    status, headers, body = fetch(pair[0], "POST")
    assert status == 405 and headers["allow"] == "GET, HEAD, OPTIONS" and b"GET" in body
    status, _, body = fetch(pair[0], headers={"Host": "attacker.example"})
    assert status == 400 and b"attacker.example" in body
    _, get_headers, _ = card_of(pair[0])
    status, headers, body = fetch(pair[0], "HEAD")
    assert (status, body) == (200, b"") and headers["etag"] == get_headers["etag"]
