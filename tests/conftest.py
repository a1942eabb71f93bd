"""Fixtures shared by the whole suite.

Redis and the database are real: ``REDIS_URL`` and ``DATABASE_URL`` when set (CI), otherwise an
embedded redis-server started here and a SQLite file. Integration tests run daphne processes
(``mcp_server``, ``second_server``) that share this Redis and database with each other.
"""
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

if not os.environ.get("REDIS_URL"):
    from mcpserver.embedded_redis import EmbeddedRedis

    _embedded_redis = EmbeddedRedis().start()  # stopped at exit (atexit)
    os.environ["REDIS_URL"] = _embedded_redis.url

# Keys of this run never collide with another run's, or with `make run` on the same Redis.
os.environ.setdefault("MCP_KEY_PREFIX", f"mcptest{secrets.token_hex(3)}")

from django.conf import settings  # noqa: E402  (after REDIS_URL is known)

# pytest-django imported the settings before this file ran: align them with the servers'.
settings.CACHES["default"]["LOCATION"] = os.environ["REDIS_URL"]
settings.MCP_TRANSPORT["KEY_PREFIX"] = os.environ["MCP_KEY_PREFIX"]
# Collection may have read the config already (the app's ready()): read it again from here on.
from mcp_transport.conf import get_config  # noqa: E402

get_config.cache_clear()


@pytest.fixture(scope="session")
def server_env(tmp_path_factory):
    """Environment of every server process: the same Redis, database and key prefix."""
    env = {"REDIS_URL": os.environ["REDIS_URL"], "MCP_KEY_PREFIX": os.environ["MCP_KEY_PREFIX"],
           # The run's own Celery queue: no other worker on this broker takes its jobs.
           "CELERY_QUEUE": os.environ["MCP_KEY_PREFIX"],
           # Every test client connects from 127.0.0.1, and the run's servers share one count.
           "MCP_MAX_SESSIONS_PER_ADDRESS": "1000000",
           "DJANGO_SETTINGS_MODULE": "mcpserver.settings", "PYTHONPATH": str(ROOT),
           # Every server and worker of the run lives until its end; idle ones must not keep
           # database connections (PostgreSQL allows 100; the suite reached 99 with 60 s reuse).
           "DJANGO_CONN_MAX_AGE": "0"}
    env["DATABASE_URL"] = os.environ.get("DATABASE_URL") or \
        f"sqlite:///{tmp_path_factory.mktemp('db') / 'integration.sqlite3'}"
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
                   cwd=ROOT, env={**os.environ, **env}, check=True)
    return env


@pytest.fixture(scope="session")
def start_server(server_env):
    """Start another daphne process: ``start_server(**extra_env)``; all stop at the end."""
    from mcp_transport.testing import LiveServer

    servers = []

    def start(**extra_env):
        server = LiveServer(env={**server_env, **extra_env}, cwd=ROOT).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def mcp_server(start_server):
    return start_server()


@pytest.fixture(scope="session")
def second_server(start_server):
    return start_server()


@pytest.fixture(scope="session")
def start_worker(server_env):
    """Start a Celery worker process on the run's queue: ``start_worker(**extra_env)``.

    Its heartbeat is fast (0.3 s), so that servers of any HEARTBEAT_SECONDS see it alive and a
    killed one is noticed within a second."""
    from mcp_transport.testing import LiveWorker

    workers = []

    def start(**extra_env):
        env = {**server_env, "LOG_LEVEL": "INFO", "MCP_TRANSPORT_JSON": json.dumps({"HEARTBEAT_SECONDS": 0.3}),
               **extra_env}
        worker = LiveWorker(queue=env["CELERY_QUEUE"], env=env, cwd=ROOT).start()
        workers.append(worker)
        return worker

    yield start
    for worker in workers:
        worker.stop()


@pytest.fixture(scope="session")
def celery_worker(start_worker):
    return start_worker()


@pytest.fixture
def client(mcp_server):
    from mcp_transport.testing import HttpClient

    return HttpClient(mcp_server.url)


@pytest.fixture
def session(client):
    """A client with an initialized 2025-11-25 session."""
    client.initialize()
    return client


ADMIN_USER, ADMIN_PASSWORD = "admin", "admin-password-for-tests"


@pytest.fixture(scope="session")
def admin_login(server_env):
    """A superuser in the servers' database: (username, password)."""
    code = ("from django.contrib.auth.models import User; "
            f"User.objects.filter(username={ADMIN_USER!r}).exists() or "
            f"User.objects.create_superuser({ADMIN_USER!r}, 'admin@example.com', {ADMIN_PASSWORD!r})")
    subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env={**os.environ, **server_env},
                   check=True, capture_output=True)
    return ADMIN_USER, ADMIN_PASSWORD


# -- Redis Sentinel and Cluster (private redis-server processes on free ports) -----------------

def _topology(kind):
    import shutil

    from mcpserver.redis_topologies import RedisClusterSet, SentinelSet

    if not shutil.which("redis-server") or not shutil.which("redis-cli"):
        pytest.skip("redis-server and redis-cli (7.0 or later) are not on PATH")
    return (SentinelSet() if kind == "sentinel" else RedisClusterSet()).start()


@pytest.fixture(scope="session")
def sentinel_set():
    """A master, a replica and three Sentinels (mcpserver/redis_topologies.py), for the run."""
    topology = _topology("sentinel")
    yield topology
    topology.stop()


@pytest.fixture(scope="session")
def redis_cluster():
    """A six-node Redis Cluster (three masters, one replica each), for the run."""
    topology = _topology("cluster")
    yield topology
    topology.stop()
