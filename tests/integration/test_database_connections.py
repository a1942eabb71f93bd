"""Anonymous requests to Django's views cannot take the database's connections (issue 38), on a
real daphne with persistent connections (CONN_MAX_AGE 60, the example project's default) and
PostgreSQL (CI's DATABASE_URL).

Django's ASGI handler runs each request's sync code in a thread of that request's own; before,
the connection a view opened there stayed open after the thread was gone: 126 anonymous
registrations held 96 of PostgreSQL's 100 connections and everyone else got "too many clients
already". Now the request's connections close when it ends (transports/serving.py)."""
import json
import os
import secrets
import urllib.error
import urllib.request
from urllib.parse import urlencode, urlsplit

import pytest

from .test_admin import Admin
from .waiting import eventually

POSTGRESQL = os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://"))
pytestmark = pytest.mark.skipif(not POSTGRESQL, reason="counts connections in pg_stat_activity (CI runs PostgreSQL)")

#: Requests of each kind: each one used to keep a connection.
REQUESTS = 30
#: What one server may hold: Channels' sync thread, the auth threads, the probe's, the one request
#: whose thread is closing it as the count is read.
BOUND = 6


@pytest.fixture(scope="module")
def persistent_server(start_server, server_env):
    """A server whose connections persist for 60 s, named in pg_stat_activity by an
    application_name of its own (the run's other servers share its database)."""
    name = f"mcp-conn-{secrets.token_hex(4)}"
    url = server_env["DATABASE_URL"]
    url += ("&" if urlsplit(url).query else "?") + urlencode({"application_name": name})
    # Keys of its own: its registrations must not spend the per-network budget that the run's
    # other servers (all at 127.0.0.1) count in Redis (test_oauth_flow's 429 when they met).
    server = start_server(DJANGO_CONN_MAX_AGE="60", DATABASE_URL=url,
                          MCP_KEY_PREFIX=f"{server_env['MCP_KEY_PREFIX']}-conn",
                          MCP_TRANSPORT_JSON=json.dumps({"OAUTH_REGISTRATIONS_PER_ADDRESS": 1000}))
    server.application_name = name
    return server


def held(server) -> int:
    import psycopg

    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as connection:
        return connection.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                                  [server.application_name]).fetchone()[0]


def post(server, path, body: bytes, content_type: str) -> int:
    request = urllib.request.Request(server.url.removesuffix("/mcp") + path, data=body, method="POST",
                                     headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status
    except urllib.error.HTTPError as error:
        return error.code


def at_most_bound(server):
    count = held(server)
    assert count <= BOUND, f"{count} connections held by one server"
    return count


def test_anonymous_registrations_and_token_posts_hold_no_connections(persistent_server):
    registration = json.dumps({"redirect_uris": ["http://127.0.0.1:9/cb"], "client_name": "conn"}).encode()
    assert {post(persistent_server, "/o/register/", registration, "application/json")
            for _ in range(REQUESTS)} == {201}
    eventually(lambda: at_most_bound(persistent_server), deadline=10)
    token = urlencode({"grant_type": "authorization_code", "code": "x", "client_id": "nobody"}).encode()
    assert {post(persistent_server, "/o/token/", token, "application/x-www-form-urlencoded")
            for _ in range(REQUESTS)} == {401}
    eventually(lambda: at_most_bound(persistent_server), deadline=10)


def test_admin_pages_hold_no_connections(persistent_server, admin_login):
    admin = Admin(persistent_server, admin_login)
    for _ in range(REQUESTS // 3):
        admin.page("/admin/mcp_transport/mcpsession/")
        admin.page("/admin/auth/user/")
        admin.page("/admin/")
    eventually(lambda: at_most_bound(persistent_server), deadline=10)
