"""Live parts that several integration test files start alike: each file still gets its own
(module scope), as it did when each file defined them, so what one file's tests leave behind (rows,
sessions, a busy worker) never shows in another file's.

- ``admin_server`` and ``admin``: a daphne that flushes counters and samples the dashboard every
  0.3 s, and a staff user logged in to its admin (test_admin*.py);
- ``auth_server`` and ``connect_as``: a daphne with ``MCP_AUTH=on``, and the official SDK client
  on it with a bearer token (test_auth.py, the model toolsets' tests);
- ``redis_server``: a private redis-server of the test's own, which it may pause or kill
  (test_redis_faults.py, test_probes.py);
- ``own_queue``, ``own_queue_server``: a Celery queue no other file's worker consumes, and a daphne
  sending its jobs there (the files that kill or block the workers they start on it).
"""
import json
import os
import secrets
import signal

import pytest


@pytest.fixture(scope="module")
def admin_server(start_server):
    from .test_admin import FAST

    return start_server(MCP_TRANSPORT_JSON=FAST)


@pytest.fixture
def redis_server():
    from mcpserver.embedded_redis import EmbeddedRedis

    server = EmbeddedRedis().start()
    yield server
    if server.process is not None and server.process.poll() is None:
        os.kill(server.process.pid, signal.SIGCONT)  # a test that failed while it was paused
    server.stop()


@pytest.fixture(scope="module")
def admin(admin_server, admin_login):
    from .test_admin import Admin

    return Admin(admin_server, admin_login)


@pytest.fixture(scope="module")
def auth_server(start_server):
    return start_server(MCP_AUTH="on")


@pytest.fixture
def connect_as(auth_server):
    """``connect_as(token, mode, **options)``: an ``mcp.Client`` (not yet entered) of the official
    SDK on ``auth_server`` with a bearer token, in the SDK's ``mode`` ("auto": 2026-07-28,
    "legacy"); ``options`` go to ``Client`` (message_handler, elicitation_callback)."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    def connect(token, mode, **options):
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        return Client(streamable_http_client(auth_server.url, http_client=http), mode=mode, **options)

    return connect


@pytest.fixture(scope="module")
def own_queue(request):
    """The name of a Celery queue of the module's own (``<run prefix>-<module>-<random>``)."""
    module = request.module.__name__.rpartition(".")[2].removeprefix("test_")
    return f"{os.environ['MCP_KEY_PREFIX']}-{module}-{secrets.token_hex(2)}"


@pytest.fixture(scope="module")
def own_queue_server(start_server, own_queue, request):
    """A daphne sending its jobs to ``own_queue``, with the module's ``SERVER_SETTINGS`` (a dict
    of MCP_TRANSPORT settings)."""
    return start_server(CELERY_QUEUE=own_queue, MCP_TRANSPORT_JSON=json.dumps(request.module.SERVER_SETTINGS))
