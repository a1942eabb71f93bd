"""WSGI entry point for the admin alone (the MCP endpoint needs ASGI)."""
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mcpserver.settings")
application = get_wsgi_application()
