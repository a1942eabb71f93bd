"""Plain Django views of the app (the MCP endpoint itself is a Channels consumer)."""
import secrets

from django.http import Http404, HttpResponse
from django.views.decorators.http import require_GET

from . import prometheus
from .conf import get_config


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
