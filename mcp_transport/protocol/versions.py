"""Protocol revisions this server speaks, and version negotiation.

"If the server supports the requested protocol version, it MUST respond with the same version.
Otherwise, the server MUST respond with another protocol version it supports. This SHOULD be the
latest version supported by the server." -- spec 2025-11-25 basic/lifecycle
"""
LATEST = "2025-11-25"
SUPPORTED = ("2025-11-25", "2025-06-18", "2025-03-26")
#: Revisions from which streams start with a priming event (SEP-1699, spec 2025-11-25).
PRIMING_SINCE = "2025-11-25"
#: The stateless era, served per request without a session (protocol/modern.py, modern.py).
MODERN = ("2026-07-28",)
#: Key of the per-request version in a modern request's ``params._meta``.
MODERN_META_VERSION = "io.modelcontextprotocol/protocolVersion"


def negotiate(requested, supported=SUPPORTED) -> str:
    """"If the server supports the requested protocol version, it MUST respond with the same
    version. Otherwise ... the latest version supported by the server." -- basic/lifecycle"""
    return requested if requested in supported else LATEST


def primes_streams(version: str) -> bool:
    # Dates compare correctly as strings.
    return version >= PRIMING_SINCE


def is_modern_request(params: dict) -> bool:
    meta = params.get("_meta")
    return isinstance(meta, dict) and MODERN_META_VERSION in meta
