"""System checks for settings that cannot work.

- mcp_transport.E001: MCP_TRANSPORT has unknown keys.
- mcp_transport.E002: EVENT_STORE cannot be built (BACKEND not importable, or OPTIONS refused).
- mcp_transport.W001: ALLOWED_ORIGINS is empty with DEBUG off (only loopback browsers can call).
"""
from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.core.exceptions import ImproperlyConfigured

from .conf import get_config


@register(Tags.compatibility)
def settings_check(app_configs, **kwargs):
    try:
        config = get_config()
    except ImproperlyConfigured as exc:
        return [Error(str(exc), hint="See mcp_transport/conf.py for the keys.", id="mcp_transport.E001")]
    if not settings.DEBUG and not config["ALLOWED_ORIGINS"] and not config["ALLOW_LOOPBACK_ORIGINS"]:
        return [Warning("No browser origin may call the MCP endpoint.",
                        hint="Set MCP_TRANSPORT['ALLOWED_ORIGINS'].", id="mcp_transport.W001")]
    return []


@register(Tags.compatibility)
def event_store_check(app_configs, **kwargs):
    from .storage import get_event_store

    try:
        get_config()
    except ImproperlyConfigured:
        return []  # E001 says it
    try:
        get_event_store()
    except Exception as exc:
        return [Error(f"MCP_TRANSPORT['EVENT_STORE'] cannot be built: {exc!r}",
                      hint="BACKEND is a dotted path to an EventStore class; OPTIONS are its keyword arguments.",
                      id="mcp_transport.E002")]
    return []
