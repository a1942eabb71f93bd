"""The Server Card document (protocol/server_card.py): built from serverInfo, the fields and
constraints of the extension's schema.ts (experimental-ext-server-card), the same bytes and
ETag for the same card."""
import json

import pytest

from mcp_transport.protocol import server_card

INFO = {"name": "com.example/weather", "version": "1.2.0", "description": "Forecasts for any city."}
URL = "https://mcp.example.com/mcp"


def test_a_minimal_card_has_the_v1_schema_and_the_identity():
    remote = server_card.streamable_http_remote(URL, ["2026-07-28", "2025-11-25"], token_required=False)
    card = server_card.build(INFO, [remote])
    assert card == {"$schema": "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json",
                    "name": "com.example/weather", "version": "1.2.0", "description": "Forecasts for any city.",
                    "remotes": [{"type": "streamable-http", "url": URL,
                                 "supportedProtocolVersions": ["2026-07-28", "2025-11-25"]}]}


def test_optional_fields_come_from_server_info_and_nothing_else_does():
    icon = {"src": "https://example.com/icon.png", "mimeType": "image/png", "sizes": ["48x48"], "theme": "dark"}
    info = {**INFO, "title": "Weather", "websiteUrl": "https://example.com", "icons": [icon],
            "somethingElse": 1}
    card = server_card.build(info, [])
    assert card["title"] == "Weather" and card["websiteUrl"] == "https://example.com" and card["icons"] == [icon]
    # "Server Cards do not enumerate primitives", nor capabilities.
    assert set(card) == {"$schema", "name", "version", "description", "title", "websiteUrl", "icons", "remotes"}


def test_with_a_token_required_the_remote_lists_the_authorization_header():
    remote = server_card.streamable_http_remote(URL, ["2026-07-28"], token_required=True)
    (header,) = remote["headers"]
    assert header["name"] == "Authorization" and header["isRequired"] is True and header["isSecret"] is True
    assert header["value"] == "Bearer {token}"
    assert header["variables"] == {"token": {"description": "The access token.", "isRequired": True,
                                             "isSecret": True}}


@pytest.mark.parametrize("name, usable", [
    ("com.example/weather", True), ("io.github.someone/my_server-2", True), ("a/b", True),
    ("django-mcp-transport", False), ("com.example/weather/extra", False), ("com.example/", False),
    ("/weather", False), ("com.example/wea ther", False), ("x" * 190 + "/" + "y" * 10, False), (None, False)])
def test_the_name_is_reverse_dns_with_one_slash(name, usable):
    assert (server_card.name_problem(name) is None) is usable


def test_a_card_needs_a_name_and_a_description():
    assert server_card.missing(INFO) is None
    assert "reverse-DNS" in server_card.missing({**INFO, "name": "django-mcp-transport"})
    assert "SERVER_DESCRIPTION" in server_card.missing({"name": "com.example/weather", "version": "1"})
    assert "SERVER_DESCRIPTION" in server_card.missing({**INFO, "description": "x" * 101})


@pytest.mark.parametrize("icon, problem", [
    ({"src": "https://example.com/a.png"}, None),
    ({"src": "data:image/png;base64,iVBORw0KGgo=", "mimeType": "image/png", "sizes": ["any"], "theme": "light"}, None),
    ({"src": "javascript:alert(1)"}, "src"),
    ({"mimeType": "image/png"}, "'src'"),
    ({"src": "https://example.com/a.png", "size": "48x48"}, "'src'"),
    ({"src": "https://example.com/a.png", "sizes": "48x48"}, "sizes"),
    ({"src": "https://example.com/a.png", "theme": "blue"}, "theme"),
    ("https://example.com/a.png", "'src'")])
def test_icons_are_mcp_icons(icon, problem):
    found = server_card.icon_problem(icon)
    assert found is None if problem is None else problem in found


def test_url_and_text_settings():
    assert server_card.url_problem("SERVER_WEBSITE_URL", None) is None
    assert server_card.url_problem("SERVER_WEBSITE_URL", "https://example.com/docs") is None
    assert server_card.url_problem("SERVER_WEBSITE_URL", "example.com") is not None
    assert server_card.text_problem("SERVER_TITLE", None) is None
    assert server_card.text_problem("SERVER_TITLE", "") is not None


def test_the_same_card_is_the_same_bytes_and_etag_whatever_the_order_of_its_keys():
    card = server_card.build(INFO, [])
    shuffled = dict(reversed(list(card.items())))
    assert server_card.encode(card) == server_card.encode(shuffled)
    assert json.loads(server_card.encode(card)) == card
    tag = server_card.entity_tag(server_card.encode(card))
    assert tag == server_card.entity_tag(server_card.encode(shuffled))
    assert tag.startswith('"') and tag.endswith('"') and len(tag) == 34
    other = server_card.entity_tag(server_card.encode({**card, "version": "1.2.1"}))
    assert other != tag


def test_answers_carry_cors_for_any_origin_and_cache_headers():
    headers = dict(server_card.response_headers('"t"'))
    assert headers == {"ETag": '"t"', "Cache-Control": "public, max-age=3600", "Access-Control-Allow-Origin": "*",
                       "Access-Control-Allow-Methods": "GET",
                       "Access-Control-Allow-Headers": "Content-Type, If-None-Match",
                       "Access-Control-Expose-Headers": "ETag"}
