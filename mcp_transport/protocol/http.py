"""Pure checks on an HTTP request head: method, Origin, Content-Type, Accept, version header.

Each check takes strings and either returns a decision or raises a ``TransportError`` that
carries the status to answer with. No scope, no request object, no I/O.
"""
import functools
import ipaddress
import json
from dataclasses import dataclass
from typing import Iterable, Optional
from urllib.parse import urlsplit

from . import versions
from .errors import TransportError

ALLOWED_METHODS = ("GET", "POST", "DELETE")
JSON = "application/json"
SSE = "text/event-stream"
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


def read_headers(raw: Iterable) -> dict:
    """ASGI ``(bytes, bytes)`` header pairs to a dict of lower-case names; repeats are joined."""
    headers = {}
    for name, value in raw:
        key, text = name.decode("latin-1").lower(), value.decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    return headers


def check_method(method: str) -> None:
    if method not in ALLOWED_METHODS:
        raise TransportError(f"Method {method} is not allowed on the MCP endpoint.", http_status=405,
                             headers=[("allow", ", ".join(ALLOWED_METHODS))])


def is_loopback_origin(origin: str) -> bool:
    try:
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and parts.hostname in LOOPBACK_HOSTS
    except ValueError:
        return False


def check_origin(origin: Optional[str], allowed: Iterable[str], allow_loopback: bool = True) -> None:
    """"If the Origin header is present and invalid, servers MUST respond with HTTP 403
    Forbidden." -- spec 2025-11-25 basic/transports (Security Warning). A missing Origin is a
    non-browser client and passes."""
    if origin is None:
        return
    # Read once (a generator would be used up by the first "in") and never as one string
    # (where "in" would be a substring test).
    allowed = frozenset(_normal_origin(a) for a in ((allowed,) if isinstance(allowed, str) else allowed))
    origin = _normal_origin(origin)
    if "*" in allowed or origin in allowed or (allow_loopback and is_loopback_origin(origin)):
        return
    raise TransportError(f"Origin {origin!r} is not allowed.", http_status=403)


def _normal_origin(origin: str) -> str:
    # Scheme and host are case-insensitive (RFC 6454 serialises them in lower case).
    return origin.strip().rstrip("/").lower()


def check_content_type(content_type: Optional[str]) -> None:
    """A POST body must be JSON. A missing header is taken as JSON (lenient); anything else is 415."""
    if content_type is None:
        return
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type != JSON:
        raise TransportError("Content-Type must be application/json.", http_status=415)


def check_body_size(size: int, limit: int) -> None:
    if size > limit:
        raise TransportError(body_too_large(limit), http_status=413)


def body_too_large(limit: int) -> str:
    return f"The request body is larger than {limit} bytes."


#: Reason phrases of the statuses the server answers before the application sees a request.
REASONS = {400: "Bad Request", 408: "Request Timeout", 413: "Content Too Large",
           431: "Request Header Fields Too Large"}


def refusal_response(status: int, message: str) -> bytes:
    """A whole HTTP/1.1 response refusing a request that is not read to its end: a JSON-RPC
    error without an id (as every transport-level error of this endpoint), then the connection
    closes ("Connection: close": the rest of the request is never read)."""
    body = json.dumps({"jsonrpc": "2.0", "error": {"code": -32600, "message": message}},
                      separators=(",", ":")).encode()
    head = (f"HTTP/1.1 {status} {REASONS[status]}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
    return head.encode("ascii") + body


def valid_networks(values) -> bool:
    """True for a list (or tuple) of IP addresses or networks ipaddress can read."""
    if not isinstance(values, (list, tuple)):
        return False
    try:
        [ipaddress.ip_network(value, strict=False) for value in values]
    except (TypeError, ValueError):
        return False
    return True


def client_address(peer: Optional[str], forwarded_for: Optional[str], trusted: Iterable[str]) -> str:
    """The address a client's limits are counted by.

    The TCP peer, unless the peer is a trusted proxy: then the right-most address of
    X-Forwarded-For that is not a trusted proxy itself (proxies append the address they saw,
    so what is left of it was written by the client and proves nothing). Without trusted
    proxies, the header is ignored: anyone can send it."""
    networks = [ipaddress.ip_network(value, strict=False) for value in trusted]
    address = peer or "unknown"
    if not forwarded_for or not _in_networks(address, networks):
        return address
    for hop in reversed([part.strip() for part in forwarded_for.split(",")]):
        if not _in_networks(hop, networks):
            return hop if _is_address(hop) else address
    return address


def network_of(address: str) -> str:
    """The network a client address counts in, for limits one client must not escape by taking
    another address: an IPv4 address itself, an IPv6 address's /64 (the smallest subnet a site
    is given, RFC 7421: one host may pick any of its 2**64 addresses), an IPv4-mapped IPv6
    address as its IPv4 address. Anything else ("unknown") as it is."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if ip.version == 6 and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    if ip.version == 6:
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def _in_networks(address: str, networks) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in networks)


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class PostAccept:
    """What a POST's Accept header allows for the reply."""

    json: bool
    sse: bool
    #: The client ranks text/event-stream above application/json (by q, then by order).
    prefers_sse: bool


def _media_ranges(accept: str):
    for index, item in enumerate(accept.split(",")):
        media, *params = [part.strip() for part in item.split(";")]
        quality = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if media:
            yield media.lower(), quality, index


def _rank(ranges, media_type):
    """(quality, -specificity, order) of the best range matching media_type, or None."""
    family = media_type.split("/")[0] + "/*"
    best = None
    for media, quality, index in ranges:
        if media in (media_type, family, "*/*"):
            specificity = 2 if media == media_type else (1 if media == family else 0)
            candidate = (specificity, quality, index)
            if best is None or candidate[0] > best[0]:
                best = candidate
    return None if best is None or best[1] <= 0 else best


@functools.lru_cache(maxsize=128)  # a client sends the same Accept on every request
def negotiate_post(accept: Optional[str]) -> PostAccept:
    """Spec 2025-11-25 says the client MUST list both types; we are lenient (checklist A7):
    either one is enough, and 406 is only for an Accept that allows neither."""
    if accept is None or not accept.strip():
        return PostAccept(json=True, sse=True, prefers_sse=False)
    ranges = list(_media_ranges(accept))
    json_rank, sse_rank = _rank(ranges, JSON), _rank(ranges, SSE)
    if json_rank is None and sse_rank is None:
        raise TransportError("Accept must allow application/json or text/event-stream.", http_status=406)
    prefers_sse = sse_rank is not None and (
        json_rank is None or (sse_rank[1], -sse_rank[2]) > (json_rank[1], -json_rank[2]))
    return PostAccept(json=json_rank is not None, sse=sse_rank is not None, prefers_sse=prefers_sse)


def check_get_accept(accept: Optional[str]) -> None:
    """"The client MUST include an Accept header, listing text/event-stream"; without it, 406."""
    if accept is None or _rank(list(_media_ranges(accept)), SSE) is None:
        raise TransportError("Accept must allow text/event-stream for the GET stream.", http_status=406)


def request_version(header: Optional[str], negotiated: str) -> str:
    """The version a session request runs under.

    "If the server receives a request with an invalid or unsupported MCP-Protocol-Version, it
    MUST respond with 400 Bad Request." A missing header means the negotiated version ("by
    relying on the protocol version negotiated during initialization"). Any supported version
    is accepted, not only the negotiated one: the conformance suite sends 2025-03-26 inside
    2025-11-25 sessions.
    """
    if header is None:
        return negotiated
    version = header.strip()
    if version not in versions.SUPPORTED:
        raise TransportError(f"Unsupported MCP-Protocol-Version {version!r}; this server supports "
                             f"{', '.join(versions.SUPPORTED)}.")
    return version
