"""Django URLs of the app: ``path("", include("mcp_transport.urls"))`` serves ``/metrics``.

The metrics view answers 404 until ``MCP_TRANSPORT["METRICS_ACCESS"]`` says who may read it.
"""
from django.urls import path

from .views import metrics_view

app_name = "mcp_transport"

urlpatterns = [
    path("metrics", metrics_view, name="metrics"),
]
