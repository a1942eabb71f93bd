"""Extensions (SEP-2133) on the wire, without I/O: what a client's capabilities say of one.

"Clients and servers negotiate ... through the standard MCP extensions capability mechanism":
a client declares an extension under ``capabilities.extensions`` (2025-11-25: its
``initialize`` request; 2026-07-28: each request's ``_meta`` clientCapabilities), with its
settings object (``{}`` when it has none).
"""
from typing import Optional


def client_settings(client_capabilities, extension: str) -> Optional[dict]:
    """The settings the client declared for ``extension`` (a dict, ``{}`` for none), or None
    when it did not declare it (or declared something that is not an object)."""
    extensions = client_capabilities.get("extensions") if isinstance(client_capabilities, dict) else None
    settings = extensions.get(extension) if isinstance(extensions, dict) else None
    return settings if isinstance(settings, dict) else None


def client_declares(client_capabilities, extension: str) -> bool:
    return client_settings(client_capabilities, extension) is not None
