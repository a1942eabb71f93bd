"""The 2026-07-28 ("modern") era on the wire: which era a POST belongs to, and the checks a
modern request must pass before it reaches a method. Pure functions over a parsed request and
a dict of lower-case headers; they return decisions or raise the error to answer with.

"A request carrying modern per-request _meta is served statelessly according to this revision.
An initialize request selects legacy semantics, scoped ... to the session (HTTP). A dual-era
server MAY serve both eras concurrently on the same endpoint." -- spec 2026-07-28 versioning
(Backward Compatibility). The order of the checks is the ladder of spec-checklist §3.2.
"""
import base64
import binascii
import re
from typing import Mapping, Optional

from .errors import InvalidParams, RemoteProtocolError
from .jsonrpc import Request, progress_token

#: Revisions served statelessly, newest first (server/discover's supportedVersions).
MODERN_VERSIONS = ("2026-07-28",)
#: Revisions that need initialize and a session (never modern, whatever the header says).
LEGACY_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")

META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"

#: RFC 5424 severities, lowest first (the values of logLevel).
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

#: Methods 2026-07-28 removed: "404 Not Found and a JSON-RPC error with code -32601".
REMOVED_METHODS = frozenset({"initialize", "ping", "logging/setLevel", "resources/subscribe",
                             "resources/unsubscribe", "notifications/roots/list_changed"})

HEADER_MISMATCH = -32020
MISSING_CLIENT_CAPABILITY = -32021
UNSUPPORTED_VERSION = -32022


class HeaderMismatch(RemoteProtocolError):
    """A required header is missing, differs from the body, or holds invalid characters."""

    code = HEADER_MISMATCH
    http_status = 400


class MissingClientCapability(RemoteProtocolError):
    """"the server MUST return a MissingRequiredClientCapabilityError" -- data.requiredCapabilities
    is a ClientCapabilities object such as {"sampling": {}}."""

    code = MISSING_CLIENT_CAPABILITY
    http_status = 400

    def __init__(self, message, required: dict):
        super().__init__(message, data={"requiredCapabilities": required})


class UnsupportedVersion(RemoteProtocolError):
    code = UNSUPPORTED_VERSION
    http_status = 400

    def __init__(self, requested):
        super().__init__(f"Unsupported protocol version {requested!r}; this server serves "
                         f"{', '.join(MODERN_VERSIONS)} statelessly (or {LEGACY_VERSIONS[-1]} after initialize).",
                         data={"supported": list(MODERN_VERSIONS), "requested": requested})


class InvalidMeta(RemoteProtocolError):
    """"A request missing any required field is malformed; the server MUST reject it with JSON-RPC
    error code -32602 ... On HTTP, the response status MUST be 400"."""

    code = -32602
    http_status = 400


class SubscriptionLimit(InvalidMeta):
    """A listen asks for more resource subscriptions, or a longer URI, than a session may hold
    (MAX_SUBSCRIPTIONS_PER_SESSION, MAX_URI_BYTES); ``limit`` names the one for the metrics."""

    def __init__(self, message, limit: str):
        super().__init__(message)
        self.limit = limit


class UnknownMethod(RemoteProtocolError):
    """"the server MUST respond with 404 Not Found and a JSON-RPC error with code -32601"."""

    code = -32601
    http_status = 404


# -- which era ---------------------------------------------------------------------------------

def body_version(params: dict):
    meta = params.get("_meta")
    return meta.get(META_PROTOCOL_VERSION) if isinstance(meta, dict) else None


def is_modern(message, headers: Mapping[str, str]) -> bool:
    """Body first: ``params._meta`` naming a protocol version makes a request or notification
    modern; otherwise an ``MCP-Protocol-Version`` header that is not a legacy revision does (the
    request then fails the modern checks with a modern error, so its client stays modern). A
    request that carries a session id is always legacy: its session chose the era."""
    if "mcp-session-id" in headers or not hasattr(message, "method"):
        return False
    if isinstance(message.params.get("_meta"), dict) and META_PROTOCOL_VERSION in message.params["_meta"]:
        return True
    header = headers.get("mcp-protocol-version")
    return header is not None and header.strip() not in LEGACY_VERSIONS and message.method != "initialize"


def check_stream_method(method: str, headers: Mapping[str, str]) -> None:
    """Ladder step 2: "GET and DELETE are legacy only". One that says it is 2026-07-28 (by its
    version header, with no session) gets 405: "A server supporting only 2026 SHOULD answer GET
    or DELETE with 405" -- there is no GET stream or session to end in this era."""
    header = _header(headers, "mcp-protocol-version")
    if method in ("GET", "DELETE") and "mcp-session-id" not in headers and header is not None \
            and header not in LEGACY_VERSIONS:
        raise RemoteProtocolError(f"{method} is not part of protocol {header}: POST requests (and "
                                  "subscriptions/listen for notifications).", http_status=405,
                                  headers=[("allow", "POST")])


# -- the checks, in the ladder's order ----------------------------------------------------------

def check_envelope(request: Request, headers: Mapping[str, str], name_key: Optional[str] = None) -> dict:
    """Ladder steps 5.1 to 5.4: version header vs body, supported version, required ``_meta``,
    ``Mcp-Method`` / ``Mcp-Name`` (``name_key``: the params key the method's name header
    mirrors, the method's declared target). Returns the request's ``_meta``."""
    params = request.params
    version = body_version(params)
    header = _header(headers, "mcp-protocol-version")
    # "MCP-Protocol-Version MUST match the io.modelcontextprotocol/protocolVersion field"
    if version is not None and header != version:
        raise HeaderMismatch("The MCP-Protocol-Version header does not match params._meta's protocol version.")
    requested = version if version is not None else header
    if requested not in MODERN_VERSIONS:
        raise UnsupportedVersion(requested)
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        raise InvalidMeta(f"params._meta is required and must carry {META_PROTOCOL_VERSION} and "
                          f"{META_CLIENT_CAPABILITIES}.")
    missing = [key for key in (META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES) if key not in meta]
    if missing:
        raise InvalidMeta(f"params._meta is missing {' and '.join(missing)}.")
    if not isinstance(meta[META_CLIENT_CAPABILITIES], dict):
        raise InvalidMeta(f"{META_CLIENT_CAPABILITIES} must be an object.")
    if META_LOG_LEVEL in meta and meta[META_LOG_LEVEL] not in LOG_LEVELS:
        raise InvalidMeta(f"{META_LOG_LEVEL} must be one of {', '.join(LOG_LEVELS)}.")
    check_progress_token(params)
    check_routing_headers(request, headers, name_key)
    return meta


def check_progress_token(params: dict) -> None:
    """The legacy era's rule for ``_meta.progressToken`` (jsonrpc.progress_token: "The progress
    token MUST be a string or integer value"), answered as this era answers a malformed
    ``_meta``: "the server MUST reject it with JSON-RPC error code -32602 ... On HTTP, the
    response status MUST be 400"."""
    try:
        progress_token(params)
    except InvalidParams as exc:
        raise InvalidMeta(exc.message) from None


def check_routing_headers(request: Request, headers: Mapping[str, str], key: Optional[str] = None) -> None:
    """"Mcp-Method (all requests) and Mcp-Name (for tools/call, resources/read and prompts/get)
    are REQUIRED": "the value of params.name or params.uri" (and taskId for the tasks
    extension), ``key``; values compare case-sensitively after the HTTP whitespace is trimmed."""
    if _header(headers, "mcp-method") != request.method:
        raise HeaderMismatch(f"The Mcp-Method header must be exactly the request's method {request.method!r}.")
    value = request.params.get(key) if key else None
    if value is not None and decode_header_value(_header(headers, "mcp-name")) != value:
        raise HeaderMismatch(f"The Mcp-Name header must be exactly params.{key} ({value!r}).")


def check_param_headers(arguments: dict, input_schema: dict, headers: Mapping[str, str]) -> None:
    """Ladder step 5.7: ``Mcp-Param-{Name}`` headers mirror the top-level arguments whose schema
    says ``"x-mcp-header": Name``. "A recognized one must match the body", and a value present
    in the body with its header missing is rejected too (conformance
    http-custom-header-server-validation); integers compare numerically."""
    properties = input_schema.get("properties") if isinstance(input_schema, dict) else None
    for name, schema in (properties or {}).items():
        token = schema.get("x-mcp-header") if isinstance(schema, dict) else None
        if not isinstance(token, str) or not token:
            continue
        value = arguments.get(name)
        raw = _header(headers, f"mcp-param-{token.lower()}")
        if value is None:
            if raw is not None:
                decode_header_value(raw)  # still rejects invalid encodings
            continue
        if raw is None:
            raise HeaderMismatch(f"The Mcp-Param-{token} header is required: arguments.{name} is set.")
        if not _param_matches(value, decode_header_value(raw), schema.get("type")):
            raise HeaderMismatch(f"The Mcp-Param-{token} header does not match arguments.{name}.")


_BASE64 = re.compile(r"^=\?base64\?(?P<data>.*)\?=$", re.DOTALL)
_CANONICAL_INTEGER = re.compile(r"^-?[0-9]+(\.0+)?$")


def decode_header_value(value: Optional[str]) -> Optional[str]:
    """"A value of the form =?base64?...?= must be decoded before comparing"; anything else is
    literal. Invalid base64 (bad padding, characters outside the alphabet, not UTF-8) is a
    header with invalid characters: -32020."""
    if value is None:
        return None
    match = _BASE64.match(value)
    if match is None:
        return value
    try:
        return base64.b64decode(match["data"], validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        raise HeaderMismatch("A =?base64?...?= header value is not valid base64 of UTF-8 text.") from None


def _param_matches(value, decoded: str, declared_type) -> bool:
    if isinstance(value, bool):
        return decoded == ("true" if value else "false")
    if declared_type == "integer" and isinstance(value, (int, float)) and _CANONICAL_INTEGER.match(decoded):
        return float(value).is_integer() and int(decoded.split(".")[0]) == int(value)
    if isinstance(value, (int, float)):
        return decoded == str(value)
    return isinstance(value, str) and decoded == value


def _header(headers, name) -> Optional[str]:
    value = headers.get(name)
    # RFC 9110 §5.5: "a field value does not include leading or trailing whitespace".
    return value.strip(" \t") if isinstance(value, str) else None


# -- results -------------------------------------------------------------------------------------

def stamp(result: dict, server_info: dict, cache: Optional[tuple] = None) -> dict:
    """"resultType is required on every result"; servers SHOULD put serverInfo in its _meta;
    cacheable results carry ttlMs and cacheScope (``cache`` = (ttl_ms, scope))."""
    result.setdefault("resultType", "complete")
    meta = result.get("_meta")
    result["_meta"] = {**(meta if isinstance(meta, dict) else {}), META_SERVER_INFO: server_info}
    if cache is not None and result["resultType"] == "complete":
        result.setdefault("ttlMs", cache[0])
        result.setdefault("cacheScope", cache[1])
    return result


# -- subscriptions/listen --------------------------------------------------------------------------

#: Filter flag -> the notification it lets through.
LIST_FLAGS = {"toolsListChanged": "notifications/tools/list_changed",
              "promptsListChanged": "notifications/prompts/list_changed",
              "resourcesListChanged": "notifications/resources/list_changed"}


def honored_filter(requested, capabilities: dict, max_uris: Optional[int] = None,
                   max_uri_bytes: Optional[int] = None) -> dict:
    """The subset of a listen request's ``notifications`` this server honors: the list flags of
    the features it declares with listChanged, and resource subscriptions if it declares them.

    ``resourceSubscriptions`` obeys the caps of ``resources/subscribe`` (at most ``max_uris``
    URIs, each at most ``max_uri_bytes`` long), checked before the listen keeps any of it: an
    open listen holds its filter for as long as it lasts."""
    if not isinstance(requested, dict):
        raise InvalidMeta('subscriptions/listen needs params.notifications, an object.')
    feature = {"toolsListChanged": "tools", "promptsListChanged": "prompts", "resourcesListChanged": "resources"}
    honored = {flag: True for flag, name in feature.items()
               if requested.get(flag) is True and capabilities.get(name, {}).get("listChanged")}
    uris = requested.get("resourceSubscriptions")
    if uris is not None:
        if not isinstance(uris, list) or not all(isinstance(uri, str) for uri in uris):
            raise InvalidMeta("notifications.resourceSubscriptions must be a list of URIs.")
        if max_uris is not None and len(uris) > max_uris:
            raise SubscriptionLimit(f"notifications.resourceSubscriptions holds {len(uris)} URIs; "
                                    f"a listen may subscribe to {max_uris} at most.", "subscriptions")
        if max_uri_bytes is not None and any(len(uri.encode()) > max_uri_bytes for uri in uris):
            raise SubscriptionLimit("A URI of notifications.resourceSubscriptions is longer than "
                                    f"{max_uri_bytes} bytes.", "uri_bytes")
        if capabilities.get("resources", {}).get("subscribe"):
            honored["resourceSubscriptions"] = list(dict.fromkeys(uris))
    return honored


def wanted(honored: dict, method: str, params: Optional[dict]) -> bool:
    """"The server MUST NOT send notification types the client has not explicitly requested"."""
    if method == "notifications/resources/updated":
        return (params or {}).get("uri") in honored.get("resourceSubscriptions", ())
    return any(honored.get(flag) and method == name for flag, name in LIST_FLAGS.items())
