"""Routes a project adds to its ASGI router: ``mcp_path()`` (Streamable HTTP, and its Server Card) and, for clients
of the 2024-11-05 HTTP+SSE transport, ``sse_paths()``; and ``lifespan``, which writes what
waits for the database when a server that speaks the ASGI lifespan protocol (uvicorn) stops.

    application = ProtocolTypeRouter({"http": URLRouter([
        mcp_path("mcp"), *sse_paths(), re_path(r"", django_asgi_app)]), "lifespan": lifespan})
"""
import re

from django.apps import apps
from django.urls import URLPattern, path
from django.urls.resolvers import RegexPattern

from .transports.streamable_http import McpHttpConsumer
from .transports.endpoints import MCP_PATHS
from .transports.http_sse import MessagesConsumer, SseConsumer
from .transports import server_card
from .protocol.server_card import SUFFIX as SERVER_CARD
from .cors import has_origin
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
    return URLPattern(EndpointPattern(route), EndpointApp(McpHttpConsumer.as_asgi()))


class EndpointPattern(RegexPattern):
    """Exactly ``<route>`` or ``<route>/server-card``: two string comparisons on every request,
    not a regular expression's match and its groups (the regex is what Django's checks and
    ``describe()`` read)."""

    def __init__(self, route: str):
        super().__init__(rf"^{re.escape(route)}(?:{re.escape(SERVER_CARD)})?$", is_endpoint=True)
        self.paths = (route, route + SERVER_CARD)

    def match(self, path):
        return ("", (), {}) if path in self.paths else None


class EndpointApp:
    """The endpoint's ASGI app: its Server Card (transports/server_card.py), a browser's request
    through CORS (cors.py, with django-cors-headers installed), else the consumer. One object in
    front of the consumer, since every request's every resumption passes through each frame."""

    def __init__(self, consumer):
        self.consumer = consumer
        self.browser = browser_ready(consumer)
        self.cors = self.browser is not consumer

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            if scope["path"].endswith(SERVER_CARD):
                return await server_card.serve(scope, receive, send)
            if self.cors and has_origin(scope["headers"]):
                return await self.browser(scope, receive, send)
        return await self.consumer(scope, receive, send)


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
