"""pytest fixtures for testing your own tools against your own project (docs/testing.md).

    # conftest.py (the top-level one)
    pytest_plugins = ["mcp_transport.testing.pytest"]

- ``mcp_live_server``: daphne serving your ``ASGI_APPLICATION`` on a free port (a LiveServer).
- ``mcp_live_worker``: a Celery worker of your project consuming the run's own queue.
- ``mcp_client``: ``async with mcp_client() as client``, the official SDK's client on the server.
- ``mcp_http``: a raw ``HttpClient`` with an initialized session (status codes, frames, drops).
- ``mcp_token``: ``mcp_token("alice")`` makes a bearer token for a server with ``AUTH`` on.
- ``mcp_user``: ``mcp_user("alice", "password")`` makes a user who can sign in (``testing.oauth``).
- ``mcp_live_settings``: settings the two processes run with over yours; override it.

Both processes use your settings module with a throwaway SQLite database (migrated once per
run), their own Redis key prefix and their own Celery queue, so they never touch your data or
another run's jobs. Redis and the broker are the ones your settings name. Needs pytest-django
(for your settings), pytest-asyncio and the ``mcp`` SDK. Every fixture here is session-scoped
except the clients, and nothing starts until a test asks for it.
"""
import json
import os
import secrets
import subprocess
import sys

import pytest

from . import HttpClient, LiveServer, LiveWorker

SETTINGS_TEMPLATE = '''"""Written by mcp_transport.testing.pytest: the settings of a test run's live server and worker."""
import json as _json

from {base} import *  # noqa: F401,F403

globals().update(_json.loads({overrides!r}))
# Every test client is 127.0.0.1, one caller for the whole run: the per-caller rates apply only
# when your settings set them.
MCP_TRANSPORT = {{"REQUEST_RATE_LIMIT": None, "SESSION_OPEN_RATE": None, **globals().get("MCP_TRANSPORT", {{}}),
                 "KEY_PREFIX": {prefix!r}}}
'''


def pytest_addoption(parser):
    parser.addini("mcp_asgi_application", "daphne's application, module:attribute (default: ASGI_APPLICATION)")
    parser.addini("mcp_celery_app", "the worker's `celery -A` app (default: the package of ASGI_APPLICATION)")


def _asgi_application(config) -> str:
    from django.conf import settings

    return config.getini("mcp_asgi_application") or ":".join(settings.ASGI_APPLICATION.rsplit(".", 1))


@pytest.fixture(scope="session")
def mcp_live_settings(tmp_path_factory) -> dict:
    """Settings over yours for the live processes; values must be JSON. Override this fixture
    to change them, e.g. a PostgreSQL test database in ``DATABASES``."""
    database = tmp_path_factory.mktemp("mcp-live") / "db.sqlite3"
    return {"DATABASES": {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(database)}}}


@pytest.fixture(scope="session")
def mcp_live_env(mcp_live_settings, tmp_path_factory, pytestconfig) -> dict:
    """The environment of the live processes: a settings module over yours, migrated."""
    from django.conf import settings

    prefix = f"mcptest{secrets.token_hex(4)}"
    overrides = {**mcp_live_settings, "CELERY_TASK_DEFAULT_QUEUE": prefix}
    folder = tmp_path_factory.mktemp("mcp-live-settings")
    (folder / "mcp_live_settings.py").write_text(
        SETTINGS_TEMPLATE.format(base=settings.SETTINGS_MODULE, overrides=json.dumps(overrides), prefix=prefix))
    paths = [str(folder), str(pytestconfig.rootpath), os.getcwd(), os.environ.get("PYTHONPATH", "")]
    env = {"DJANGO_SETTINGS_MODULE": "mcp_live_settings", "PYTHONPATH": os.pathsep.join(p for p in paths if p),
           "MCP_LIVE_QUEUE": prefix}
    subprocess.run([sys.executable, "-m", "django", "migrate", "--noinput", "-v", "0"],
                   env={**os.environ, **env}, cwd=pytestconfig.rootpath, check=True)
    return env


@pytest.fixture(scope="session")
def mcp_live_server(mcp_live_env, pytestconfig):
    """daphne serving your project on 127.0.0.1 and a free port: ``.url`` is its /mcp URL."""
    server = LiveServer(_asgi_application(pytestconfig), env=mcp_live_env, cwd=pytestconfig.rootpath).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def mcp_live_worker(mcp_live_env, mcp_live_server, pytestconfig):
    """A Celery worker of your project on the run's queue (it runs your background tools)."""
    app = pytestconfig.getini("mcp_celery_app") or _asgi_application(pytestconfig).split(".")[0]
    # start() waits for the worker's "ready." line, an INFO record: LOG_LEVEL lets projects whose
    # LOGGING reads it (as the example project's does) show it; others log it at INFO anyway.
    env = {**mcp_live_env, "LOG_LEVEL": "INFO"}
    worker = LiveWorker(app=app, queue=mcp_live_env["MCP_LIVE_QUEUE"], env=env, cwd=pytestconfig.rootpath).start()
    yield worker
    worker.stop()


@pytest.fixture
def mcp_client(mcp_live_server):
    """``async with mcp_client(**options) as client``: ``mcp.Client`` on a new session of the
    live server (options are the SDK's: ``progress`` callbacks go on ``call_tool``, and
    ``mode`` defaults to "legacy", the 2025-11-25 handshake). ``token=`` sends it as a bearer
    token (``mcp_token``), ``auth=`` takes an ``httpx2.Auth`` such as ``testing.oauth.oauth_provider``."""
    from mcp import Client

    from .oauth import authorized_client

    def connect(token=None, auth=None, **options):
        options.setdefault("mode", "legacy")
        if token or auth:
            return authorized_client(mcp_live_server.url, auth=auth, token=token, **options)
        return Client(mcp_live_server.url, **options)
    return connect


@pytest.fixture
def mcp_token(mcp_live_env, pytestconfig):
    """``mcp_token(user, scope=None, expires=None)``: a new static bearer token of the live
    server's database for ``user`` (created if needed), by ``manage.py mcp_tokens create``."""
    def create(user, scope=None, expires=None):
        command = [sys.executable, "-m", "django", "mcp_tokens", "create", "--user", user]
        command += ["--scope", scope] if scope is not None else []
        command += ["--expires", expires] if expires else []
        done = subprocess.run(command, env={**os.environ, **mcp_live_env}, cwd=pytestconfig.rootpath,
                              capture_output=True, text=True, check=True)
        return done.stdout.strip().splitlines()[-1]
    return create


@pytest.fixture
def mcp_user(mcp_live_env, pytestconfig):
    """``mcp_user(username, password)``: a user of the live server's database who can sign in
    (for ``testing.oauth``); made, or given this password, by ``manage.py shell``."""
    code = ("import os\nfrom django.contrib.auth import get_user_model\n"
            "User = get_user_model()\n"
            "user, _ = User.objects.get_or_create(**{User.USERNAME_FIELD: os.environ['MCP_TEST_USER']})\n"
            "user.set_password(os.environ['MCP_TEST_PASSWORD']); user.save()\n")

    def create(username, password):
        env = {**os.environ, **mcp_live_env, "MCP_TEST_USER": username, "MCP_TEST_PASSWORD": password}
        subprocess.run([sys.executable, "-m", "django", "shell", "-v", "0", "-c", code], env=env,
                       cwd=pytestconfig.rootpath, capture_output=True, text=True, check=True)
        return username
    return create


@pytest.fixture
def mcp_http(mcp_live_server) -> HttpClient:
    """A raw HTTP client with an initialized 2025-11-25 session on the live server."""
    client = HttpClient(mcp_live_server.url)
    client.initialize()
    return client
