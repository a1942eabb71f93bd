"""Plain Django views. The MCP endpoint is routed in asgi.py, in front of these."""
from django.contrib import admin
from django.urls import path

urlpatterns = [
    path("admin/", admin.site.urls),
]
