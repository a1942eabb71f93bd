"""The test process's settings: the example project's, with a throwaway secret key.

pytest-django imports the settings before any conftest.py runs, and the example project refuses
to start with DEBUG off and no DJANGO_SECRET_KEY. The key set here is inherited by every server
and worker process the tests start (their environment copies this one).
"""
import os
import secrets

os.environ.setdefault("DJANGO_SECRET_KEY", secrets.token_urlsafe(50))
# Every test client is 127.0.0.1, one caller for the whole run: the per-caller rates a test
# checks it sets itself (as MCP_MAX_SESSIONS_PER_ADDRESS, tests/conftest.py's server_env).
os.environ.setdefault("MCP_REQUEST_RATE_LIMIT", "off")
os.environ.setdefault("MCP_SESSION_OPEN_RATE", "off")

from mcpserver.settings import *  # noqa: E402,F401,F403
