"""The example project's settings (mcpserver/settings.py) as a deployment meets them: no secret
key with DEBUG off is a clear refusal, and the documented production environment passes
``manage.py check --deploy`` with no warning."""
import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = {"DJANGO_SECRET_KEY": secrets.token_urlsafe(50), "DJANGO_HTTPS": "1",
              "DJANGO_ALLOWED_HOSTS": "mcp.example.com", "DJANGO_DEBUG": "0",
              "MCP_AUTH": "on"}


def manage(*args, **env):
    base = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SECRET_KEY", "DJANGO_SECRET_KEY_FILE",
                                                            "DJANGO_DEBUG", "DJANGO_HTTPS")}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**base, "DJANGO_SETTINGS_MODULE": "mcpserver.settings", **env}, timeout=120)


def test_debug_off_without_a_secret_key_refuses_to_start():
    done = manage("check")
    assert done.returncode != 0
    assert "ImproperlyConfigured: DJANGO_SECRET_KEY is not set" in done.stderr, done.stderr[-2000:]


def test_debug_on_runs_without_a_key():
    done = manage("check", DJANGO_DEBUG="1")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_key_may_come_from_a_file(tmp_path):
    key_file = tmp_path / "secret_key"
    key_file.write_text(secrets.token_urlsafe(50) + "\n")
    done = manage("shell", "-c", "from django.conf import settings; print(len(settings.SECRET_KEY))",
                  DJANGO_SECRET_KEY_FILE=str(key_file))
    assert done.returncode == 0 and done.stdout.split()[-1] == "67", done.stdout + done.stderr


def test_production_settings_pass_check_deploy():
    # Every check but the one asking the running Celery workers (they are a deployment's, not its
    # settings'; this machine's Redis may hold other runs' workers on other queues).
    listed = manage("check", "--deploy", "--list-tags", **PRODUCTION)
    tags = [tag for tag in listed.stdout.split() if tag != "mcp_transport_workers"]
    assert "security" in tags, listed.stdout + listed.stderr
    done = manage("check", "--deploy", "--fail-level", "WARNING", *(f"--tag={tag}" for tag in tags), **PRODUCTION)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout


def test_a_silent_postgresql_server_fails_the_connection_instead_of_holding_it():
    """A server that accepts and never answers (as behind a dropped route): libpq alone would wait
    without end, and every thread that connects with it."""
    import socket
    with socket.create_server(("127.0.0.1", 0)) as silent:
        url = f"postgres://nobody@127.0.0.1:{silent.getsockname()[1]}/none"
        done = manage("shell", "-c", "from django.db import connection; connection.ensure_connection()",
                      DJANGO_DEBUG="1", DATABASE_URL=url)
    assert done.returncode != 0 and "timeout expired" in done.stderr, done.stderr[-2000:]
