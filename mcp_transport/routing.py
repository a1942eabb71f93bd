"""``mcp_path()``: the one route a project adds to its ASGI router.

    application = ProtocolTypeRouter({"http": URLRouter([mcp_path("mcp"), re_path(r"", django_asgi_app)])})
"""
from django.urls import path

from .consumers import McpHttpConsumer
from .serving import MCP_PATHS

#: The endpoints' paths ("/mcp"), for their protected resource metadata (views.py).
endpoint_paths = []


def mcp_path(route: str = "mcp"):
    """The endpoint at exactly ``/<route>``: no trailing-slash redirect, no CSRF. Under daphne,
    its request bodies are bounded while they arrive (request_limits.py)."""
    if "/" + route not in endpoint_paths:
        endpoint_paths.append("/" + route)
    MCP_PATHS.add("/" + route.strip("/"))
    return path(route, McpHttpConsumer.as_asgi())
