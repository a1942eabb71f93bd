"""Django-native tools: a project's models and ModelAdmins as permission-checked MCP tools and
resources (docs/models.md, "Expose your models").

    from mcp_transport.toolsets import ModelToolset, register, register_admin
"""
from .admin_source import AdminToolset, register_admin
from .base import ModelToolset, register

__all__ = ["AdminToolset", "ModelToolset", "register", "register_admin"]
