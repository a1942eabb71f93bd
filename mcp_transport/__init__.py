"""django-mcp-transport: a Django app that serves MCP over Streamable HTTP.

Importing this package imports nothing from Django (as ``channels/__init__.py``), so
``mcp_transport.protocol`` stays usable on its own.
"""

__version__ = "0.1.0"

# The public API, imported lazily (PEP 562) so that `import mcp_transport` stays Django-free.
_EXPORTS = {
    "tool": "methods.registry", "task_tool": "methods.registry", "resource": "methods.registry",
    "prompt": "methods.registry", "completion": "methods.registry", "skill": "methods.skill_catalog",
    "registry": "methods.registry", "ToolError": "methods.registry",
    "Context": "methods.context", "SyncContext": "methods.context", "ToolCancelled": "methods.context",
    "ClientCapabilityError": "methods.context", "ClientRequestError": "methods.context",
    "ToolResult": "methods.content", "app": "methods.apps",
    "job_context": "running.worker", "per_process": "methods.clients",
}


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'mcp_transport' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)


__all__ = ["__version__", *_EXPORTS]
