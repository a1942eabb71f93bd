"""Browser clients: CORS with django-cors-headers, for the Django views and the MCP endpoint.

One list decides which origins may call: ``MCP_TRANSPORT["ALLOWED_ORIGINS"]`` (and the loopback
origins while ``ALLOW_LOOPBACK_ORIGINS``), the list the endpoint's Origin check (403) already
uses. django-cors-headers asks ``allowed_by_mcp_transport`` (its ``check_request_enabled``
signal) about the app's paths: the endpoint, the OAuth metadata, and the authorization server's
token, revocation and registration endpoints. Its own ``CORS_ALLOWED_ORIGINS`` can stay empty.

Django views get the headers from ``corsheaders.middleware.CorsMiddleware``. The MCP endpoint is
a Channels consumer, which no Django middleware sees, so ``mcp_path()`` wraps it in
``CorsEndpoint``: the same middleware's decisions (preflight answer, headers to add), run on a
Django request made from the ASGI scope, only for requests that carry an Origin.

Settings for django-cors-headers (the example project's)::

    from corsheaders.defaults import default_headers
    from mcp_transport.cors import MCP_REQUEST_HEADERS, MCP_EXPOSED_HEADERS
    CORS_ALLOW_HEADERS = (*default_headers, *MCP_REQUEST_HEADERS)
    CORS_EXPOSE_HEADERS = MCP_EXPOSED_HEADERS

This module imports nothing from Django at import time, so settings.py can import it.
"""
import io
import re

#: Request headers an MCP browser client sends beyond django-cors-headers' defaults (which have
#: Authorization and Content-Type): "Mcp-Session-Id", "MCP-Protocol-Version" (spec 2025-11-25
#: basic/transports), the 2026-07-28 routing headers, and Last-Event-ID for a resumed GET.
MCP_REQUEST_HEADERS = ("mcp-session-id", "mcp-protocol-version", "mcp-method", "mcp-name", "last-event-id")
#: Response headers the browser's script must be able to read: the session id to send back, and
#: the 401's challenge that names the protected resource metadata.
MCP_EXPOSED_HEADERS = ("mcp-session-id", "www-authenticate")

#: Django views of the app that browsers fetch: RFC 9728 and RFC 8414 metadata, and the
#: authorization server's token, revocation and registration endpoints (mcp_transport.oauth).
#: /o/authorize/ and /o/login/ are pages the browser navigates to, not fetches.
BROWSER_PATHS = re.compile(r"^/(\.well-known/oauth-|o/(token|revoke_token|register)/)")


def origin_allowed(origin: str) -> bool:
    from .conf import get_config
    from .protocol import http
    from .protocol.errors import TransportError

    config = get_config()
    try:
        http.check_origin(origin, config["ALLOWED_ORIGINS"], config["ALLOW_LOOPBACK_ORIGINS"])
    except TransportError:
        return False
    return True


def allowed_by_mcp_transport(sender, request, **kwargs) -> bool:
    """django-cors-headers' ``check_request_enabled`` receiver (connected in apps.py)."""
    origin = request.headers.get("origin")
    if not origin:
        return False
    if not (getattr(request, "mcp_endpoint", False) or BROWSER_PATHS.match(request.path_info)):
        return False
    return origin_allowed(origin)


def has_origin(headers) -> bool:
    for name, _ in headers:  # a loop, not any() of a generator: every request asks
        if name == b"origin":
            return True
    return False


class CorsEndpoint:
    """ASGI wrapper of the MCP endpoint: answers CORS preflights (``OPTIONS`` with
    Access-Control-Request-Method) and adds the CORS headers to the endpoint's responses, as
    django-cors-headers decides. Requests without an Origin (every non-browser client) pass
    straight through."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not has_origin(scope["headers"]):
            return await self.app(scope, receive, send)
        from corsheaders.middleware import CorsMiddleware
        from django.core.handlers.asgi import ASGIRequest
        from django.http import HttpResponse

        request = ASGIRequest(scope, io.BytesIO())
        request.mcp_endpoint = True
        middleware = CorsMiddleware(lambda request: None)
        preflight = middleware.check_preflight(request)
        if preflight is not None:
            middleware.add_response_headers(request, preflight)
            return await send_response(send, preflight)
        carrier = middleware.add_response_headers(request, HttpResponse())
        extra = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in carrier.items()
                 if name.lower().startswith("access-control-") or name.lower() == "vary"]

        async def send_with_cors(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        return await self.app(scope, receive, send_with_cors)


async def send_response(send, response) -> None:
    headers = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in response.items()]
    await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": response.content})
