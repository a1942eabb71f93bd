"""Django-native tools: a project's models, ModelAdmins and Django REST Framework viewsets as
permission-checked MCP tools and resources (docs/models.md, "Expose your models").

    from mcp_transport.toolsets import ModelToolset, register, register_admin, register_viewset
"""
from .admin_source import AdminToolset, register_admin
from .base import ModelToolset, register


def register_viewset(viewset, registry=None, **options):
    """A DRF viewset's actions as tools (toolsets/drf.py). DRF is an optional extra
    (``django-mcp-transport[drf]``): it is imported here, when a project asks for it, and never
    by the app itself."""
    from .drf import register_viewset as register_drf_viewset

    return register_drf_viewset(viewset, registry=registry, **options)


__all__ = ["AdminToolset", "ModelToolset", "register", "register_admin", "register_viewset"]
