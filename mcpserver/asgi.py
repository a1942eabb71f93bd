"""ASGI entry point: /mcp goes to the MCP consumer, everything else to Django."""
import os

from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mcpserver.settings")
# Sets Django up before the app's modules import models. Static files (the admin's CSS) are
# served by daphne itself here; a deployment puts them behind nginx or WhiteNoise instead.
django_asgi_app = ASGIStaticFilesHandler(get_asgi_application())
if os.environ.get("MCP_DB_PROBE"):  # a test's view of the database work (db_probe.py)
    import mcpserver.db_probe  # noqa: E402,F401

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import re_path  # noqa: E402

from mcp_transport.routing import lifespan, mcp_path, sse_paths  # noqa: E402
from mcp_transport.transports.serving import tune_daphne, tune_gc  # noqa: E402

tune_daphne()  # harmless under uvicorn, which never calls Twisted

application = ProtocolTypeRouter({
    "http": URLRouter([mcp_path("mcp"), *sse_paths(), re_path(r"", django_asgi_app)]),
    "lifespan": lifespan,  # uvicorn: what waits for the database is written at shutdown
})
tune_gc()  # fewer garbage collections, none of what was loaded above (1,000 streams: 57 s -> 3 s)
