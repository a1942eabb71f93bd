"""Fixtures shared by the whole suite.

Redis and the database are real: ``REDIS_URL`` and ``DATABASE_URL`` when set (CI), otherwise an
embedded redis-server started here and a SQLite file. Integration tests run daphne processes
(``mcp_server``, ``second_server``) that share this Redis and database with each other.

Under pytest-xdist (``pytest -n 3``: docs/development.md) every worker is a run of its own: its
key prefix and Celery queue, its servers' database (its own SQLite file, or ``<name>_gw0`` next to
PostgreSQL's ``DATABASE_URL``), its own servers and workers. The embedded Redis, started once by
the controlling process, is shared: the key prefixes keep the workers apart, as they keep runs
apart on CI's Redis.
"""
import json
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

if not os.environ.get("REDIS_URL"):
    from mcpserver.embedded_redis import EmbeddedRedis

    _embedded_redis = EmbeddedRedis().start()  # stopped at exit (atexit)
    os.environ["REDIS_URL"] = _embedded_redis.url

#: The pytest-xdist worker this process is ("gw0", "gw1", ...), "" in a run without -n.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")

# Keys of this run never collide with another run's, or with `make run` on the same Redis; an
# xdist worker inherits the controlling process's prefix and adds its name.
os.environ.setdefault("MCP_KEY_PREFIX", f"mcptest{secrets.token_hex(3)}")
if XDIST_WORKER and not os.environ["MCP_KEY_PREFIX"].endswith(f"-{XDIST_WORKER}"):
    os.environ["MCP_KEY_PREFIX"] += f"-{XDIST_WORKER}"

from django.conf import settings  # noqa: E402  (after REDIS_URL is known)

# pytest-django imported the settings before this file ran: align them with the servers'.
settings.CACHES["default"]["LOCATION"] = os.environ["REDIS_URL"]
settings.MCP_TRANSPORT["KEY_PREFIX"] = os.environ["MCP_KEY_PREFIX"]
# The lanes' threads serve every test of the process: a connection one kept from a database test
# would be checked (and refused by pytest-django) in the next test that runs sync code. So, as
# under LocalClient, sync code leaves connections alone here; tests/unit/methods/test_context.py turns
# that back on to test it. Connections still close after use (the servers' setting).
settings.DATABASES["default"]["CONN_MAX_AGE"] = 0
from mcp_transport.methods.context import manage_connections  # noqa: E402

manage_connections.set(False)
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
           # ... and one count of failed token lookups: the suite's bad tokens are its tests', not a flood.
           "MCP_AUTH_FAILURES_PER_ADDRESS": "1000000",
           "DJANGO_SETTINGS_MODULE": "mcpserver.settings", "PYTHONPATH": str(ROOT),
           # Every server and worker of the run lives until its end; idle ones must not keep
           # database connections (PostgreSQL allows 100; the suite reached 99 with 60 s reuse).
           "DJANGO_CONN_MAX_AGE": "0"}
    env["DATABASE_URL"] = os.environ.get("DATABASE_URL") or \
        f"sqlite:///{tmp_path_factory.mktemp('db') / 'integration.sqlite3'}"
    own_database = None
    if XDIST_WORKER and env["DATABASE_URL"].startswith(("postgres://", "postgresql://")):
        own_database = _PostgresDatabase(env["DATABASE_URL"], XDIST_WORKER).create()
        env["DATABASE_URL"] = own_database.url
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
                   cwd=ROOT, env={**os.environ, **env}, check=True)
    yield env
    if own_database:
        own_database.drop()  # after every server and worker (their fixtures use this one)


class _PostgresDatabase:
    """``<name>_<worker>`` on the server of a PostgreSQL URL: an xdist worker's servers' own
    database, made empty at the start (a previous run may have left it) and dropped at the end."""

    def __init__(self, url, worker):
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        self.admin_url, self.name = url, f"{parts.path.lstrip('/')}_{worker}"
        self.url = parts._replace(path=f"/{self.name}").geturl()

    def _execute(self, *statements):
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.admin_url, autocommit=True) as connection:
            for statement in statements:
                connection.execute(sql.SQL(statement).format(sql.Identifier(self.name)))

    def create(self):
        self._execute("DROP DATABASE IF EXISTS {} WITH (FORCE)", "CREATE DATABASE {}")
        return self

    def drop(self):
        self._execute("DROP DATABASE IF EXISTS {} WITH (FORCE)")


@pytest.fixture(scope="session")
def start_server(server_env):
    """Start another daphne process: ``start_server(**extra_env)``; all stop at the end. A
    ``LiveServer`` subclass first serves the app another way (test_uvicorn.py)."""
    from mcp_transport.testing import LiveServer

    servers = []

    def start(server_class=LiveServer, **extra_env):
        server = server_class(env={**server_env, **extra_env}, cwd=ROOT).start()
        servers.append(server)
        return server

    yield start
    # Each drains (SIGTERM) at once, and a second SIGTERM (``stop``) ends at once a daphne's
    # drain that waits for calls a test left running: the run does not wait DRAIN_SECONDS each.
    for server in servers:
        if server.process.poll() is None:
            server.process.send_signal(signal.SIGTERM)
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


# -- pytest-xdist: which tests share a worker, and the order the work goes out in ----------------
#
# Under ``pytest -n`` the scheduler below gives xdist its pieces of work ("scopes"), each run whole
# by one worker: a test file, so that its module-scoped servers and workers start once; every test
# on the Sentinel set or the Cluster together, so that one worker starts those dozen redis-servers;
# each test alone for the files of SPREAD, whose tests start what they need. The scopes go out
# longest first (``--no-loadscope-reorder``): the seconds each took in the last parallel run
# (pytest's cache) or, in a fresh clone, the rough figures of LONG_SCOPES. (xdist's own
# ``--dist loadgroup`` renames ``item._nodeid``, which pytest 9 no longer reads.)

#: Files whose tests may go to different workers: each test starts the servers it needs, or the
#: file's module-scoped ones are cheap beside its length (test_auth: a token is a management
#: command each; test_drain: each test stops a daphne of its own; test_long_calls: minutes of
#: waiting on one call each, side by side on free workers, not in a row on one).
SPREAD = {"tests/integration/test_auth.py", "tests/integration/test_redis_faults.py",
          "tests/integration/test_drain.py", "tests/integration/test_long_calls.py"}
#: The files, and the test ids, of the tests on the Sentinel set and the Cluster.
TOPOLOGY_FILES = {"tests/integration/test_redis_topologies.py", "tests/storage/test_doorbell.py"}
TOPOLOGY_IDS = ("[redis-sentinel", "[redis-cluster")
#: Seconds the longest scopes took under a loaded two-core machine, for a run with no cache yet.
#: Only the order depends on them.
LONG_SCOPES = {
    "tests/integration/test_fresh_install.py": 200, "redis-topologies": 200,
    "tests/integration/test_http_sse.py": 150, "tests/integration/test_model_subscriptions.py": 150,
    "tests/integration/test_job_parking.py": 140, "tests/integration/test_job_faults.py": 140,
    "tests/integration/test_resume.py": 125, "tests/integration/test_worker_registration.py": 120,
    "tests/integration/test_admin_scale.py": 110, "tests/integration/test_hostile_clients.py": 105,
    "tests/storage/test_contract.py": 100, "tests/integration/test_stdio.py": 95,
    "tests/integration/test_admin_hardening.py": 95, "tests/integration/test_call_limits.py": 90,
    "tests/storage/test_redis.py": 85, "tests/integration/test_oauth_flow.py": 85,
    "tests/integration/test_toolsets.py": 80, "tests/integration/test_http_sessions.py": 75,
    "tests/fuzz/test_fuzz_http.py": 70, "tests/integration/test_job_cancel.py": 60,
    # A test of a SPREAD file by its name without parameters: each of its parameters as long.
    "tests/integration/test_long_calls.py::test_a_150_s_inline_call_with_progress_every_10_s": 160,
    "tests/integration/test_long_calls.py::test_a_silent_40_s_call_keeps_its_response_alive": 50,
}
_SCOPE_SECONDS = "mcp_transport/xdist-scope-seconds"


def _scope(nodeid):
    """The piece of work a test belongs to (a name; from its id alone: the controlling process
    sees only ids)."""
    path = nodeid.split("::", 1)[0]
    if path in TOPOLOGY_FILES or any(marker in nodeid for marker in TOPOLOGY_IDS):
        return "redis-topologies"
    return nodeid if path in SPREAD else path


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadscope`` (pyproject.toml) with the scopes of ``_scope``."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return _scope(nodeid)

    return Scheduling(config, log)


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: two workers per CPU (MCP_TEST_WORKERS if set). Most of a test's time is spent
    waiting for daphne, Celery and Redis processes, so a worker per CPU would leave them idle."""
    return int(os.environ.get("MCP_TEST_WORKERS") or min(8, 2 * (os.cpu_count() or 1)))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Once every plugin has ordered the tests, the longest scopes first (stable within one)."""
    cache = getattr(config, "cache", None)
    seconds = {**LONG_SCOPES, **(cache.get(_SCOPE_SECONDS, {}) if cache else {})}
    items.sort(key=lambda item: -seconds.get(_scope(item.nodeid), seconds.get(item.nodeid.split("[", 1)[0], 0)))


_took = {}


def pytest_runtest_logreport(report):
    """(In the controlling process of a parallel run) the seconds of each scope."""
    _took[_scope(report.nodeid)] = _took.get(_scope(report.nodeid), 0) + report.duration


def pytest_sessionfinish(session):
    config, cache = session.config, getattr(session.config, "cache", None)
    if cache and _took and not hasattr(config, "workerinput") and getattr(config.option, "tx", None):
        cache.set(_SCOPE_SECONDS, {**cache.get(_SCOPE_SECONDS, {}),
                                   **{scope: round(took, 1) for scope, took in _took.items()}})
