#!/usr/bin/env python3
"""Start the whole stack on embedded defaults: `make run` (PORT=9000 make run for another port).

1. Redis: REDIS_URL if set, else a private Sentinel set or Redis Cluster with REDIS_TOPOLOGY=sentinel|cluster
   (mcpserver/redis_topologies.py), else an embedded redis-server (mcpserver/embedded_redis.py).
2. A secret key: DJANGO_SECRET_KEY or DJANGO_SECRET_KEY_FILE if set, else a random one made on
   the first run into `.secret_key` (git-ignored) and reused after, so admin logins survive a
   restart (the example project refuses to start without one unless DJANGO_DEBUG=1).
3. `manage.py migrate --noinput` (SQLite in the project folder unless DATABASE_URL is set).
4. A Celery worker (with beat, for the scheduled cleanup) and daphne on 127.0.0.1:$PORT, as
   child processes.

Ctrl-C / SIGTERM stops everything and exits 0. If any child exits on its own, the others are
stopped too and this exits non-zero, so a supervisor (or scripts/conformance.sh) notices.
Stdlib only; run it with the project's venv python, which the children reuse.
"""
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from mcpserver.embedded_redis import EmbeddedRedis, set_parent_death_signal  # noqa: E402

HOST = "127.0.0.1"
STOP_TIMEOUT = 15  # seconds a child gets after SIGTERM (Celery's warm shutdown) before SIGKILL

KEY_FILE = ROOT / ".secret_key"

stop_signal = None  # set by the handler; the main loop notices it


def on_signal(signum, _frame):
    global stop_signal
    stop_signal = signum


def port_open(port):
    with socket.socket() as s:
        s.settimeout(0.3)
        return s.connect_ex((HOST, port)) == 0


def secret_key_env(env):
    """DJANGO_SECRET_KEY_FILE pointing at this checkout's own random key, unless a key is given."""
    if env.get("DJANGO_SECRET_KEY") or env.get("DJANGO_SECRET_KEY_FILE"):
        return env
    if not KEY_FILE.exists():
        KEY_FILE.touch(mode=0o600)
        KEY_FILE.write_text(secrets.token_urlsafe(50) + "\n")
        print(f"[run] made a secret key in {KEY_FILE.name} (git-ignored)", flush=True)
    return {**env, "DJANGO_SECRET_KEY_FILE": str(KEY_FILE)}


def spawn(name, args, env):
    print(f"[run] starting {name}: {' '.join(args)}", flush=True)
    proc = subprocess.Popen(
        args, cwd=ROOT, env=env,
        # Own process group: a terminal Ctrl-C reaches only this script, which then stops each
        # child exactly once (Celery treats a second SIGINT as "cold shutdown now").
        process_group=0,
        # And if this script is SIGKILLed, Linux still sends the children SIGTERM.
        preexec_fn=set_parent_death_signal if sys.platform.startswith("linux") else None,
    )
    proc.name = name
    return proc


def stop_all(procs):
    alive = [p for p in procs if p.poll() is None]
    for p in alive:
        p.send_signal(signal.SIGTERM)  # the main pid only: Celery stops its own pool
    deadline = time.monotonic() + STOP_TIMEOUT
    for p in alive:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            print(f"[run] {p.name} ignored SIGTERM for {STOP_TIMEOUT}s; killing it", flush=True)
            os.killpg(p.pid, signal.SIGKILL)  # the group: a Celery pool process included
            p.wait()


def main():
    port = int(os.environ.get("PORT", "8000"))
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    if port_open(port):
        print(f"[run] port {port} on {HOST} is already in use; set PORT to another one", file=sys.stderr)
        return 2

    env = secret_key_env(dict(os.environ, PYTHONUNBUFFERED="1"))
    scratch = tempfile.mkdtemp(prefix="mcp-run-")
    redis = None
    procs = []
    try:
        if env.get("REDIS_TOPOLOGY") and not env.get("REDIS_URL"):
            # A private Sentinel set or Redis Cluster (docs/deployment.md, "Redis at scale").
            from mcpserver.redis_topologies import RedisClusterSet, SentinelSet

            redis = (SentinelSet() if env["REDIS_TOPOLOGY"] == "sentinel" else RedisClusterSet()).start()
            env["REDIS_URL"] = redis.url
            if env["REDIS_TOPOLOGY"] == "cluster":  # Celery cannot use a Cluster
                env.setdefault("CELERY_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672//")
            print(f"[run] Redis {env['REDIS_TOPOLOGY']} at {redis.url}", flush=True)
        elif not env.get("REDIS_URL"):
            redis = EmbeddedRedis(die_with_parent=True).start()
            env["REDIS_URL"] = redis.url
            print(f"[run] embedded Redis at {redis.url} (set REDIS_URL to use your own)", flush=True)
        else:
            print(f"[run] Redis at {env['REDIS_URL']}", flush=True)

        # `python -m` rather than .venv/bin scripts: the same interpreter, whichever venv runs this.
        py = sys.executable
        steps = [
            ("migrate", [py, "manage.py", "migrate", "--noinput"], True),
            # -B: beat runs inside the worker, for the scheduled cleanup (CELERY_BEAT_SCHEDULE);
            # its schedule file goes to a temporary folder, not the checkout.
            ("celery", [py, "-m", "celery", "-A", "mcpserver", "worker", "--loglevel=INFO",
                        "--concurrency=2", "-B", "--schedule", str(Path(scratch) / "celerybeat-schedule")], False),
            # A listen backlog of 4096, not Twisted's 50: clients connecting at once by the
            # thousand otherwise wait for the kernel's SYN retries (bench/RESULTS.md).
            ("daphne", [py, "-m", "daphne", "-e", f"tcp:port={port}:interface={HOST}:backlog=4096",
                        "mcpserver.asgi:application"], False),
        ]
        announced = False
        for name, args, run_to_completion in steps:
            if stop_signal:
                return 0
            proc = spawn(name, args, env)
            if run_to_completion:
                while proc.poll() is None and not stop_signal:
                    time.sleep(0.1)
                if stop_signal:
                    procs.append(proc)
                    return 0
                if proc.returncode:
                    print(f"[run] {name} failed with exit code {proc.returncode}", file=sys.stderr)
                    return proc.returncode
            else:
                procs.append(proc)

        # Supervise: the first child to exit (or a signal) brings everything down.
        while not stop_signal:
            for p in procs:
                if p.poll() is not None:
                    print(f"[run] {p.name} exited with code {p.returncode}; stopping the rest",
                          file=sys.stderr, flush=True)
                    return p.returncode if p.returncode > 0 else 1  # killed by a signal: <0
            if isinstance(redis, EmbeddedRedis) and redis.process.poll() is not None:
                print("[run] embedded Redis exited; stopping the rest", file=sys.stderr, flush=True)
                return 1
            if not announced and port_open(port):
                announced = True
                print(f"\n[run] MCP endpoint: http://{HOST}:{port}/mcp\n"
                      f"[run] Admin:        http://{HOST}:{port}/admin/\n"
                      f"[run] Ctrl-C to stop.\n", flush=True)
            time.sleep(0.2)
        print(f"[run] {signal.Signals(stop_signal).name} received; stopping", flush=True)
        return 0
    finally:
        stop_all(reversed(procs))  # daphne first, then the worker
        if redis:
            redis.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
