"""Plain Django views. The MCP endpoint is routed in asgi.py, in front of these."""
from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    # /healthz, /readyz (the probes) and /metrics (MCP_TRANSPORT["METRICS_ACCESS"])
    path("", include("mcp_transport.urls")),
    # The authorization server: RFC 8414 metadata, /o/authorize, /o/token, /o/register, /o/login.
    path("", include("mcp_transport.oauth.urls")),
]
