"""``GET <endpoint>/server-card``: the Server Card of the Streamable HTTP endpoint (SEP-2127;
the document itself is protocol/server_card.py).

Answered in front of the endpoint's consumer (``routing.EndpointApp``: ``mcp_path()`` routes
both), so it answers under daphne and uvicorn alike, and no project middleware (sessions, login, a CORS
configuration of its own) stands between a browser and the card. It reads no Redis and no
database: every process makes the same bytes, and the same ETag, from the settings.

- Without a token, AUTH on or off: "Server Cards are publicly accessible by design"; with AUTH on
  the card lists the Authorization header as required.
- ``Access-Control-Allow-Origin: *`` on every answer, and preflights answered: "Wide-open CORS
  ... is acceptable because cards carry only public, read-only metadata".
- ``ETag`` and ``304 Not Modified`` for a matching ``If-None-Match``, ``Cache-Control: public,
  max-age=3600``: "Hosts SHOULD honor If-None-Match and return 304 Not Modified".
- 400 for a Host outside ALLOWED_HOSTS (the card's URL is made of it), 404 with the reason while
  the settings cannot make a card, 405 for other methods.
"""
from django.utils.http import parse_etags

from .. import auth
from ..conf import get_config
from ..methods import dispatch
from ..protocol import http, modern, server_card, versions
from ..protocol.errors import TransportError
from .endpoint import check_host

#: What the endpoint serves, newest first: 2026-07-28 per request, the others after initialize
#: ("supportedProtocolVersions: MCP protocol versions actively supported by this remote endpoint").
PROTOCOL_VERSIONS = (*modern.MODERN_VERSIONS, *versions.SUPPORTED)
#: Seconds a browser may keep a preflight's answer.
PREFLIGHT_MAX_AGE = 86400


def card_of(scope, host: str) -> tuple:
    """(card, None) for the endpoint whose card ``scope`` asks for, or (None, why not)."""
    info = dispatch.server_info()
    problem = server_card.missing(info)
    if problem:
        return None, problem
    endpoint_path = scope["path"][:-len(server_card.SUFFIX)]
    url = auth.resource_url(scope, host, endpoint_path)  # as the endpoint names itself in its 401s
    remote = server_card.streamable_http_remote(url, PROTOCOL_VERSIONS, token_required=get_config()["AUTH"])
    return server_card.build(info, [remote]), None


def not_modified(if_none_match, etag: str) -> bool:
    """"A recipient MUST use the weak comparison function when comparing entity tags for
    If-None-Match" (RFC 9110 13.1.2)."""
    if not if_none_match:
        return False
    tags = parse_etags(if_none_match)
    return "*" in tags or any(tag.removeprefix("W/") == etag for tag in tags)


async def serve(scope, receive, send) -> None:
    headers = http.read_headers(scope["headers"])
    method = scope["method"]
    cors = list(server_card.CORS_HEADERS)
    if method == "OPTIONS":
        return await respond(send, 204, [*cors, ("Access-Control-Max-Age", str(PREFLIGHT_MAX_AGE))])
    if method not in ("GET", "HEAD"):
        return await respond(send, 405, [*cors, ("Allow", "GET, HEAD, OPTIONS")], b"Only GET reads the server card.\n")
    try:
        check_host(headers.get("host"))
    except TransportError as exc:
        return await respond(send, 400, cors, f"{exc.message}\n".encode())
    card, problem = card_of(scope, headers.get("host"))
    if card is None:
        return await respond(send, 404, cors, f"No server card yet: MCP_TRANSPORT's {problem}.\n".encode())
    body = server_card.encode(card)
    etag = server_card.entity_tag(body)
    if not_modified(headers.get("if-none-match"), etag):
        return await respond(send, 304, server_card.response_headers(etag))
    await respond(send, 200, [("Content-Type", server_card.MEDIA_TYPE), *server_card.response_headers(etag)],
                  body, head=method == "HEAD")


async def respond(send, status: int, headers: list, body: bytes = b"", head=False) -> None:
    if body and not any(name == "Content-Type" for name, _ in headers):
        headers = [("Content-Type", "text/plain; charset=utf-8"), *headers]
    raw = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers]
    if status not in (204, 304):  # "MUST NOT send a Content-Length ... with a status code of 1xx or 204"
        raw.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": b"" if head else body})
