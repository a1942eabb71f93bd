"""transports/server_card.py in process: the card, or 404 with the reason while the settings
cannot make one; the router sends <endpoint>/server-card to it and <endpoint> to the consumer.
(The HTTP behaviour itself is tested on daphne: tests/integration/test_server_card.py.)"""
import json

from django.test import override_settings

from mcp_transport import routing
from mcp_transport.transports import server_card

CARD = {"SERVER_NAME": "com.example/weather", "SERVER_DESCRIPTION": "Forecasts."}


async def answer(settings, path="/mcp/server-card", method="GET"):
    scope = {"type": "http", "method": method, "path": path, "scheme": "http", "headers": [(b"host", b"localhost")]}
    sent = []

    async def send(message):
        sent.append(message)

    with override_settings(MCP_TRANSPORT=settings, ALLOWED_HOSTS=["localhost"]):
        await server_card.serve(scope, None, send)
    start, body = sent
    return start["status"], dict(start["headers"]), body["body"]


async def test_no_card_until_the_name_is_reverse_dns_and_there_is_a_description():
    status, headers, body = await answer({})
    assert status == 404 and headers[b"access-control-allow-origin"] == b"*"
    assert body == (b"No server card yet: MCP_TRANSPORT's SERVER_NAME 'django-mcp-transport' is not a reverse-DNS "
                    b"name with one slash, such as 'com.example/weather'.\n")
    status, _, body = await answer({"SERVER_NAME": "com.example/weather"})
    assert status == 404 and b"SERVER_DESCRIPTION must be 1 to 100 characters" in body
    status, headers, body = await answer(CARD)
    assert status == 200 and headers[b"content-type"] == b"application/mcp-server-card+json"
    assert json.loads(body)["remotes"][0]["url"] == "http://localhost/mcp"
    assert int(headers[b"content-length"]) == len(body)


async def test_a_preflight_has_no_body_and_no_length():
    status, headers, body = await answer(CARD, method="OPTIONS")
    assert (status, body) == (204, b"") and b"content-length" not in headers
    assert headers[b"access-control-max-age"] == b"86400"


def test_the_route_takes_the_endpoint_and_its_card_only(monkeypatch):
    monkeypatch.setattr(routing, "endpoint_paths", [])  # this process's own endpoints stay as they are
    monkeypatch.setattr(routing, "MCP_PATHS", set())
    route = routing.mcp_path("api/mcp")
    assert route.pattern.match("api/mcp") and route.pattern.match("api/mcp/server-card")
    assert not route.pattern.match("api/mcp/") and not route.pattern.match("api/mcp/server-cards")
    assert not route.pattern.match("api/mcpx")
