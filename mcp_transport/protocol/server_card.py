"""The Server Card (SEP-2127, the ``io.modelcontextprotocol/server-card`` extension): a static,
public document saying who a remote MCP server is and how to connect to it, before connecting.

"MCP Servers MAY host their Server Card at ``GET <streamable-http-url>/server-card``" and "SHOULD
respect the ``application/mcp-server-card+json`` media type" (experimental-ext-server-card,
docs/discovery.md). Its identity is the server's Implementation (``serverInfo``): "the values a
client observes once connected -- the serverInfo (name, version) and supportedVersions from
server/discover ... SHOULD NOT contradict the equivalent values declared in the Server Card". It
lists no primitives and no capabilities: "Server Cards do not enumerate primitives".

Pure functions: the transport (transports/server_card.py) brings serverInfo, the endpoint's URL
and the versions it serves, and sends the bytes with ``response_headers``.
"""
import hashlib
import json
import re
from typing import Optional
from urllib.parse import urlsplit

#: "Must be the /v1/ Server Card schema URL" (schema.ts, ServerCard.$schema).
SCHEMA = "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json"
MEDIA_TYPE = "application/mcp-server-card+json"
#: Appended to the Streamable HTTP endpoint's path: "/mcp" -> "/mcp/server-card".
SUFFIX = "/server-card"
#: "Server name in reverse-DNS format. Must contain exactly one forward slash separating
#: namespace from server name" (schema.ts: 3 to 200 characters of this pattern).
NAME = re.compile(r"[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+")
NAME_LENGTHS = (3, 200)
#: description and title: 1 to 100 characters (schema.ts).
TEXT_MAX = 100
#: "Cache-Control: public, max-age=3600" (docs/discovery.md, Caching).
MAX_AGE_SECONDS = 3600
ICON_THEMES = ("light", "dark")
ICON_KEYS = {"src", "mimeType", "sizes", "theme"}

#: "Hosted Server Card endpoints MUST include appropriate CORS headers" (docs/discovery.md).
CORS_HEADERS = (("Access-Control-Allow-Origin", "*"), ("Access-Control-Allow-Methods", "GET"),
                ("Access-Control-Allow-Headers", "Content-Type, If-None-Match"),
                ("Access-Control-Expose-Headers", "ETag"))


def name_problem(name) -> Optional[str]:
    """Why ``name`` cannot be a card's name, or None."""
    low, high = NAME_LENGTHS
    if isinstance(name, str) and low <= len(name) <= high and NAME.fullmatch(name):
        return None
    return f"SERVER_NAME {name!r} is not a reverse-DNS name with one slash, such as 'com.example/weather'"


def text_problem(setting: str, value, required=False) -> Optional[str]:
    """SERVER_DESCRIPTION, SERVER_TITLE: None (unless required) or 1 to 100 characters."""
    if value is None and not required:
        return None
    if isinstance(value, str) and 1 <= len(value) <= TEXT_MAX:
        return None
    return f"{setting} must be 1 to {TEXT_MAX} characters of text, not {value!r}"


def url_problem(setting: str, value) -> Optional[str]:
    if value is None or (isinstance(value, str) and urlsplit(value).scheme in ("http", "https")
                         and urlsplit(value).netloc):
        return None
    return f"{setting} must be an http(s) URL, not {value!r}"


def icon_problem(icon) -> Optional[str]:
    """An Icon of the spec: {"src" (an http(s) or data: URI), "mimeType"?, "sizes"? (["48x48"],
    ["any"]), "theme"? ("light" or "dark")}."""
    if not isinstance(icon, dict) or not isinstance(icon.get("src"), str) or set(icon) - ICON_KEYS:
        return f"each of SERVER_ICONS must be a dict with a 'src' and only {sorted(ICON_KEYS)}, not {icon!r}"
    if urlsplit(icon["src"]).scheme not in ("http", "https", "data"):
        return f"an icon's src must be an http(s) or data: URI, not {icon['src']!r}"
    sizes = icon.get("sizes", [])
    if not isinstance(icon.get("mimeType", ""), str) or not isinstance(sizes, list) \
            or not all(isinstance(size, str) for size in sizes):
        return f"an icon's mimeType must be text and its sizes a list of text (\"48x48\"), not {icon!r}"
    if icon.get("theme", "light") not in ICON_THEMES:
        return f"an icon's theme must be 'light' or 'dark', not {icon['theme']!r}"
    return None


def missing(server_info: dict) -> Optional[str]:
    """Why no card can be made of ``server_info``, or None: a card needs a reverse-DNS name and
    a description, both required by its schema."""
    return name_problem(server_info["name"]) or text_problem("SERVER_DESCRIPTION", server_info.get("description"),
                                                             required=True)


def streamable_http_remote(url: str, protocol_versions, token_required: bool) -> dict:
    """One ``remotes[]`` entry: the endpoint, the versions it serves, and with authorization on
    the header every request needs (its value templated, as the schema's own example does)."""
    remote = {"type": "streamable-http", "url": url, "supportedProtocolVersions": list(protocol_versions)}
    if token_required:
        remote["headers"] = [{
            "name": "Authorization", "isRequired": True, "isSecret": True, "value": "Bearer {token}",
            "description": "An OAuth 2.1 access token for this endpoint; its protected resource metadata "
                           "(RFC 9728) names the authorization server.",
            "variables": {"token": {"description": "The access token.", "isRequired": True, "isSecret": True}}}]
    return remote


def build(server_info: dict, remotes: list) -> dict:
    """The card of a server whose Implementation is ``server_info`` (``missing()`` is None)."""
    card = {"$schema": SCHEMA, "name": server_info["name"], "version": server_info["version"],
            "description": server_info["description"]}
    card.update((key, server_info[key]) for key in ("title", "websiteUrl", "icons") if key in server_info)
    card["remotes"] = remotes
    return card


def encode(card: dict) -> bytes:
    """The card's bytes: the same card is the same bytes in every process (sorted keys)."""
    return json.dumps(card, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def entity_tag(body: bytes) -> str:
    """A strong ETag of the card's bytes, so any process recognises another's: "Entity tags are
    opaque HTTP validators; this specification does not prescribe their form"."""
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def response_headers(etag: str) -> list:
    """Of a 200 and of a 304 alike (a 304 read by a script must pass CORS too)."""
    return [("ETag", etag), ("Cache-Control", f"public, max-age={MAX_AGE_SECONDS}"), *CORS_HEADERS]
