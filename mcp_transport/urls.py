"""Django URLs of the app: ``path("", include("mcp_transport.urls"))`` serves

- ``/healthz`` and ``/readyz``: the liveness and readiness probes (probes.py; with
  ``mcp_transport.probes.ProbesMiddleware`` first in MIDDLEWARE, whatever the Host header or scheme);
- ``/metrics``: answers 404 until ``MCP_TRANSPORT["METRICS_ACCESS"]`` says who may read it;
- ``/.well-known/oauth-protected-resource`` and its path form
  ``/.well-known/oauth-protected-resource/<endpoint>``: the endpoint's RFC 9728 metadata while
  ``MCP_TRANSPORT["AUTH"]`` is on (404 otherwise).
"""
from django.urls import path, re_path

from .probes import healthz_view, readyz_view
from .views import metrics_view, protected_resource_view

app_name = "mcp_transport"

urlpatterns = [
    path("healthz", healthz_view, name="healthz"),
    path("readyz", readyz_view, name="readyz"),
    path("metrics", metrics_view, name="metrics"),
    re_path(r"^\.well-known/oauth-protected-resource(?:/(?P<endpoint>.+))?$", protected_resource_view,
            name="protected-resource"),
]
