"""Session lifetime against real processes: idle expiry, and the database as the durable record."""
import time

import pytest
import redis

from mcp_transport.testing import HttpClient


@pytest.fixture(scope="module")
def short_lived_server(start_server):
    return start_server(MCP_SESSION_IDLE_TIMEOUT="2")


def test_idle_session_expires_with_404(short_lived_server):
    client = HttpClient(short_lived_server.url)
    client.initialize()
    assert client.call("ping")["result"] == {}
    time.sleep(3)
    assert client.request("POST", client.message("ping")).status == 404


def test_requests_keep_a_session_alive(short_lived_server):
    client = HttpClient(short_lived_server.url)
    client.initialize()
    for _ in range(4):  # 4 s in all, twice the idle timeout, never idle for more than 1 s
        time.sleep(1)
        assert client.call("ping")["result"] == {}


def test_session_survives_a_redis_flush(mcp_server, server_env):
    client = HttpClient(mcp_server.url)
    client.initialize()
    assert client.call("ping")["result"] == {}  # a session has a row once it did something
    prefix = server_env["MCP_KEY_PREFIX"]
    connection = redis.Redis.from_url(server_env["REDIS_URL"])
    connection.delete(f"{prefix}:session:{client.session_id}")  # as if Redis lost it
    assert client.call("ping")["result"] == {}  # refilled from the database row
    assert connection.exists(f"{prefix}:session:{client.session_id}")
