"""Routes a project adds to its ASGI router: ``mcp_path()`` (Streamable HTTP, and its Server Card) and, for clients
of the 2024-11-05 HTTP+SSE transport, ``sse_paths()``; and ``lifespan``, which writes what
waits for the database when a server that speaks the ASGI lifespan protocol (uvicorn) stops.

    application = ProtocolTypeRouter({"http": URLRouter([
        mcp_path("mcp"), *sse_paths(), re_path(r"", django_asgi_app)]), "lifespan": lifespan})
"""
import re

from django.apps import apps
from django.urls import path, re_path

from .transports.streamable_http import McpHttpConsumer
from .transports.endpoints import MCP_PATHS
from .transports.http_sse import MessagesConsumer, SseConsumer
from .transports.server_card import WithServerCard
from .protocol.server_card import SUFFIX as SERVER_CARD
from .transports.serving import lifespan  # noqa: F401 (a route of the router: see above)

#: The endpoints' paths ("/mcp", "/sse"), for their protected resource metadata (views.py).
endpoint_paths = []


def mcp_path(route: str = "mcp"):
    """The endpoint at exactly ``/<route>``: no trailing-slash redirect, no CSRF. Under daphne,
    its request bodies are bounded while they arrive (request_limits.py). Its Server Card at
    ``/<route>/server-card`` (transports/server_card.py)."""
    if "/" + route not in endpoint_paths:
        endpoint_paths.append("/" + route)
    MCP_PATHS.add("/" + route.strip("/"))
    endpoint = WithServerCard(browser_ready(McpHttpConsumer.as_asgi()))
    return re_path(rf"^{re.escape(route)}(?:{re.escape(SERVER_CARD)})?$", endpoint)


def sse_paths(sse_route: str = "sse", messages_route: str = "messages") -> list:
    """``GET /sse`` and ``POST /messages``, the HTTP+SSE transport (transports/http_sse.py), on
    the same sessions, tools and event store as ``mcp_path()``. With AUTH on, the pair is one
    protected resource, ``/sse`` (the URL its clients are given), with its metadata at
    ``/.well-known/oauth-protected-resource/sse``."""
    if "/" + sse_route not in endpoint_paths:
        endpoint_paths.append("/" + sse_route)
    MCP_PATHS.add("/" + messages_route.strip("/"))  # its bodies are bounded while they arrive too
    return [path(sse_route, browser_ready(SseConsumer.as_asgi(messages_route=messages_route))),
            path(messages_route, browser_ready(MessagesConsumer.as_asgi(sse_route=sse_route)))]


def browser_ready(app):
    """With django-cors-headers installed, the endpoint answers CORS preflights and carries
    its headers for ALLOWED_ORIGINS (cors.py); without it, the consumer as it is."""
    if not apps.is_installed("corsheaders"):
        return app
    from .cors import CorsEndpoint
    return CorsEndpoint(app)
