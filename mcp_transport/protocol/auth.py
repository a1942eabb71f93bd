"""OAuth 2.1 resource-server pieces with no I/O: bearer tokens, challenges, metadata, durations.

"MCP servers MUST implement OAuth 2.0 Protected Resource Metadata (RFC9728)" and "MUST use the
HTTP header WWW-Authenticate when returning a 401 Unauthorized to indicate the location of the
resource server metadata URL" -- spec 2025-11-25 basic/authorization. Tokens come only from the
``Authorization`` header: "Access tokens MUST NOT be included in the URI query string".
"""
import re
from urllib.parse import urlsplit, urlunsplit

WELL_KNOWN = "/.well-known/oauth-protected-resource"

#: RFC 6750 §2.1: credentials = "Bearer" 1*SP b64token.
_BEARER = re.compile(r"^Bearer +([A-Za-z0-9\-._~+/]+=*) *$", re.IGNORECASE)
_DURATION = re.compile(r"^(\d+)([smhdw])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def bearer_token(header):
    """The token of an ``Authorization: Bearer <token>`` header; None when absent or malformed."""
    match = _BEARER.match(header or "")
    return match.group(1) if match else None


def metadata_url(resource: str) -> str:
    """RFC 9728 §3.1: the well-known path goes between the host and the resource's path, so
    ``https://host/mcp`` has its metadata at ``https://host/.well-known/oauth-protected-resource/mcp``."""
    parts = urlsplit(resource)
    path = parts.path.rstrip("/")
    return urlunsplit((parts.scheme, parts.netloc, WELL_KNOWN + path, parts.query, ""))


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def challenge(resource: str, scopes, error=None, description=None) -> str:
    """A ``WWW-Authenticate`` value. RFC 6750 §3.1: a request without credentials gets no
    error code; an invalid token ``invalid_token``; a token lacking a scope ``insufficient_scope``."""
    params = []
    if error:
        params.append(f"error={_quoted(error)}")
    if description:
        params.append(f"error_description={_quoted(description)}")
    if scopes:
        # "MCP servers SHOULD include a scope parameter in the WWW-Authenticate header"
        params.append(f"scope={_quoted(' '.join(scopes))}")
    params.append(f"resource_metadata={_quoted(metadata_url(resource))}")
    return "Bearer " + ", ".join(params)


def protected_resource_metadata(resource: str, authorization_servers, scopes) -> dict:
    """RFC 9728 §2: "resource" is the protected resource's identifier, the endpoint's URL."""
    return {"resource": resource, "authorization_servers": list(authorization_servers),
            "scopes_supported": list(scopes), "bearer_methods_supported": ["header"]}


def parse_scopes(value) -> frozenset:
    """A space-separated scope string (RFC 6749 §3.3) or a list of scopes."""
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset(value.split())
    return frozenset(str(item) for item in value)


def parse_duration(text: str) -> int:
    """Seconds in ``90s``, ``15m``, ``12h``, ``30d`` or ``2w``; ValueError otherwise."""
    match = _DURATION.match(text.strip())
    if not match or int(match.group(1)) <= 0:
        raise ValueError(f"{text!r} is not a duration such as 90s, 15m, 12h, 30d or 2w.")
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2)]
