"""MCP Apps (``io.modelcontextprotocol/ui``, SEP-1865, stable 2026-01-26) on the wire, without
I/O: the extension's identifier, the view's MIME type, and the shapes of ``_meta.ui`` a tool
and a ``ui://`` resource carry (checked here, so that a malformed one is refused at startup).
"""
from typing import Optional

from .extensions import client_settings

EXTENSION = "io.modelcontextprotocol/ui"
#: "mimeType MUST be text/html;profile=mcp-app".
MIME_TYPE = "text/html;profile=mcp-app"
SCHEME = "ui://"
#: McpUiResourceCsp's fields: each a list of origins.
CSP_FIELDS = ("connectDomains", "resourceDomains", "frameDomains", "baseUriDomains")
#: UIResourceMeta.permissions' features: each an empty object.
PERMISSIONS = ("camera", "microphone", "geolocation", "clipboardWrite")
#: McpUiToolMeta.visibility's values; "visibility defaults to ["model", "app"] if omitted".
VISIBILITY = ("model", "app")


def client_supports(client_capabilities) -> bool:
    """Whether the client renders apps: it declared the extension with our MIME type among its
    ``mimeTypes`` ("mimeTypes: Array of supported content types (REQUIRED)"), as the official
    SDKs' ``client_supports_apps`` / ``getUiCapability`` read it."""
    settings = client_settings(client_capabilities, EXTENSION)
    mime_types = settings.get("mimeTypes") if settings is not None else None
    return isinstance(mime_types, list) and MIME_TYPE in mime_types


def csp_errors(csp) -> list:
    """What is wrong with a ``_meta.ui.csp`` (empty: nothing)."""
    if not isinstance(csp, dict):
        return ["csp must be a dict."]
    errors = [f"csp has an unknown field {key!r}; use {', '.join(CSP_FIELDS)}." for key in csp if key not in CSP_FIELDS]
    for key in CSP_FIELDS:
        origins = csp.get(key, [])
        if not isinstance(origins, (list, tuple)) or not all(_is_origin(origin) for origin in origins):
            errors.append(f"csp {key} must be a list of origins such as \"https://api.example.com\".")
    return errors


def _is_origin(origin) -> bool:
    """A scheme and a host ("Wildcard subdomains supported: https://*.example.com"), no path."""
    if not isinstance(origin, str) or "://" not in origin or any(c.isspace() or c in ";,'\"" for c in origin):
        return False
    scheme, _, host = origin.partition("://")
    return bool(scheme) and bool(host) and "/" not in host.rstrip("/")


def resource_meta_errors(ui: dict) -> list:
    """What is wrong with a resource's ``_meta.ui`` (csp, permissions, domain, prefersBorder)."""
    errors = csp_errors(ui["csp"]) if "csp" in ui else []
    permissions = ui.get("permissions", {})
    if not isinstance(permissions, dict) or any(key not in PERMISSIONS or value != {}
                                                 for key, value in permissions.items()):
        errors.append(f"permissions must map some of {', '.join(PERMISSIONS)} to {{}}.")
    if "domain" in ui and not (isinstance(ui["domain"], str) and ui["domain"]):
        errors.append("domain must be a non-empty string.")
    if "prefersBorder" in ui and not isinstance(ui["prefersBorder"], bool):
        errors.append("prefersBorder must be true or false.")
    return errors


def tool_meta(resource_uri: str, visibility: Optional[list] = None) -> dict:
    """A tool's ``_meta.ui`` (McpUiToolMeta); raises ValueError for a URI or visibility the
    spec does not allow."""
    if not isinstance(resource_uri, str) or not resource_uri.startswith(SCHEME) or len(resource_uri) == len(SCHEME):
        raise ValueError(f"An app's URI must use the ui:// scheme (\"URI MUST start with ui://\"), got {resource_uri!r}.")
    ui = {"resourceUri": resource_uri}
    if visibility is not None:
        if not visibility or any(value not in VISIBILITY for value in visibility) or len(set(visibility)) != len(visibility):
            raise ValueError(f"visibility must list some of {', '.join(VISIBILITY)}, got {visibility!r}.")
        ui["visibility"] = list(visibility)
    return ui


def for_the_model(meta: Optional[dict]) -> bool:
    """Whether a tool with this ``_meta`` is the model's to see: not one whose ``_meta.ui``
    visibility leaves out "model" ("app": "Tool callable by the app from this server only")."""
    ui = (meta or {}).get("ui")
    return not isinstance(ui, dict) or "model" in ui.get("visibility", VISIBILITY)


def with_tool_meta(meta: Optional[dict], ui) -> Optional[dict]:
    """A tool's ``_meta`` with ``ui`` (``@tool(ui=...)``: a ``ui://`` URI, or a dict with
    ``resourceUri`` and ``visibility``) as its ``_meta.ui``."""
    if ui is None:
        return meta
    if isinstance(ui, str):
        ui = {"resourceUri": ui}
    if not isinstance(ui, dict) or set(ui) - {"resourceUri", "visibility"}:
        raise ValueError(f"ui must be a ui:// URI or a dict of resourceUri and visibility, got {ui!r}.")
    return {**(meta or {}), "ui": tool_meta(ui.get("resourceUri"), ui.get("visibility"))}
