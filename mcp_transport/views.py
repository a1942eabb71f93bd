"""Plain Django views of the app (the MCP endpoint itself is a Channels consumer)."""
import secrets

from urllib.parse import urlsplit

from django.http import Http404, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET

from . import prometheus
from .conf import get_config
from .protocol.auth import protected_resource_metadata


@require_GET
async def metrics_view(request):
    """The shared counters in the Prometheus text format, for whom ``METRICS_ACCESS`` allows."""
    config = get_config()
    access = config["METRICS_ACCESS"]
    if access == "staff":
        user = await request.auser()
        if not (user.is_active and user.is_staff):
            return HttpResponse("Staff only.\n", status=403, content_type="text/plain")
    elif access == "token":
        if not _bearer_matches(request.headers.get("Authorization", ""), config["METRICS_TOKEN"]):
            response = HttpResponse("A bearer token is required.\n", status=401, content_type="text/plain")
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
    else:
        raise Http404("Metrics are off.")
    body, content_type = prometheus.render(await prometheus.scrape(), request.headers.get("Accept", ""))
    return HttpResponse(body, content_type=content_type)


def _bearer_matches(header: str, token) -> bool:
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not token or not given:
        return False
    return secrets.compare_digest(given.strip().encode(), str(token).encode())


@require_GET
def protected_resource_view(request, endpoint=None):
    """RFC 9728 metadata of the MCP endpoint, at ``/.well-known/oauth-protected-resource`` and
    its path form ``/.well-known/oauth-protected-resource/mcp``; 404 while auth is off.

    "MCP servers MUST implement OAuth 2.0 Protected Resource Metadata (RFC9728)"; the document
    "MUST include the authorization_servers field containing at least one authorization server"
    -- spec 2025-11-25 basic/authorization."""
    from . import auth
    from .routing import endpoint_paths

    config = get_config()
    if not config["AUTH"]:
        raise Http404("Authorization is off.")
    if config["AUTH_RESOURCE"]:
        resource = config["AUTH_RESOURCE"]
        if endpoint is not None and urlsplit(resource).path.rstrip("/") != "/" + endpoint.rstrip("/"):
            raise Http404("No protected resource there.")
    else:
        known = endpoint_paths or ["/mcp"]
        path = "/" + endpoint if endpoint is not None else known[0]
        if path not in known:
            raise Http404("No protected resource there.")
        resource = f"{request.scheme}://{request.get_host()}{path}"
    metadata = protected_resource_metadata(resource, auth.authorization_servers(resource), config["AUTH_SCOPES"])
    return JsonResponse(metadata)
