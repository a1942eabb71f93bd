"""What the benchmarks that run the example project share: its processes on a Redis of their own,
and the percentile they report."""
import os
import secrets
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcp_transport.testing import LiveServer, LiveWorker  # noqa: E402
from mcpserver.embedded_redis import EmbeddedRedis  # noqa: E402


def percentile(values, q):
    """The q-th percentile (0-100) of values, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


@contextmanager
def example_project(worker=True):
    """One daphne (and one Celery worker) of the example project on an embedded Redis of its
    own and a fresh SQLite database, or the PostgreSQL of ``DATABASE_URL``: yields (server,
    worker or None)."""
    redis = EmbeddedRedis().start()
    prefix = f"bench{secrets.token_hex(3)}"
    env = {**os.environ, "REDIS_URL": redis.url, "MCP_KEY_PREFIX": prefix, "CELERY_QUEUE": prefix,
           "DATABASE_URL": os.environ.get("DATABASE_URL") or f"sqlite:///{tempfile.mkdtemp()}/bench.sqlite3",
           "DJANGO_SETTINGS_MODULE": "mcpserver.settings",
           # One address sends the whole load: the per-caller rates would measure themselves.
           "MCP_REQUEST_RATE_LIMIT": "off", "MCP_SESSION_OPEN_RATE": "off"}
    env.setdefault("DJANGO_SECRET_KEY", secrets.token_urlsafe(50))  # DEBUG off needs one
    processes = []
    try:
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
        processes.append(LiveServer(env=env, cwd=ROOT).start())
        if worker:
            processes.append(LiveWorker(queue=prefix, env={**env, "LOG_LEVEL": "INFO"}, cwd=ROOT).start())
        yield processes[0], (processes[1] if worker else None)
    finally:
        for process in reversed(processes):
            process.stop()
        redis.stop()
