#!/usr/bin/env python3
"""TM Dev Lab v2's I/O-bound workload (http4k/benchmark-mcp-servers-v2), reproduced here, side by side:
our app under daphne and uvicorn against the newest FastMCP, in one run.

    .venv/bin/python bench/tmdevlab/run.py --repeat 3 --seconds 30

What runs: a Redis with the benchmark's data (seed.py), its HTTP API (api.py), and each server
in turn, pinned to the same core (``taskset -c 0``; the load, the API and Redis on the others):
ours with the three tools as async ``@tool`` functions (benchapp/, bench_settings.py: a project
with only them), FastMCP 4 stateless with JSON replies in a virtualenv of its own
(bench/.venv-fastmcp, made on the first run with the pinned version). The load (load.py) is the
benchmark's k6 sequence: 50 users, four full sessions an iteration, content checks, 50 ms of
think time. Rounds are interleaved (reversed every other one); the medians are printed, with
Redis commands per session (ours: the app's own Redis apart from the data's) and, with a
PostgreSQL ``--database-url``, database transactions per session. The official Go SDK server is
not built: this machine has no Go toolchain.
"""
import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import run  # noqa: E402 -- bench/run.py: Redis, Child, free_port, cpu_seconds
import seed  # noqa: E402

FASTMCP = "fastmcp==4.2.3"
FASTMCP_VENV = run.BENCH / ".venv-fastmcp"
TARGETS = ("ours-daphne", "ours-uvicorn", "fastmcp")
#: A target's name with this suffix runs the load in the stateless 2026-07-28 era (ours only).
MODERN_SUFFIX = "-2026"


def fastmcp_python() -> str:
    python = FASTMCP_VENV / "bin" / "python"
    if not python.exists():
        run.log(f"making {run.rel(FASTMCP_VENV)} ({FASTMCP})")
        subprocess.run([sys.executable, "-m", "venv", str(FASTMCP_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", FASTMCP,
                        "uvicorn[standard]", "httpx", "redis"], check=True)
    return str(python)


def pinned(command, cpus):
    return ["taskset", "-c", cpus, *command] if shutil.which("taskset") and os.cpu_count() > 1 else command


def server_command(name, port):
    name = name.removesuffix(MODERN_SUFFIX)
    uvicorn = ["--host", run.HOST, "--port", str(port), "--workers", "1", "--loop", "uvloop", "--http", "httptools",
               "--log-level", "warning"]
    if name == "ours-daphne":
        return [*run.venv_tool("daphne"), "-v", "0", "-e", f"tcp:port={port}:interface={run.HOST}:backlog=4096",
                "mcpserver.asgi:application"]
    if name == "ours-uvicorn":
        return [*run.venv_tool("uvicorn"), "mcpserver.asgi:application", *uvicorn]
    return [fastmcp_python(), "-m", "uvicorn", "fastmcp_server:app", "--app-dir", str(HERE), *uvicorn]


def wait_http(url, child, timeout=90.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not child.alive():
            raise RuntimeError(f"{child.name} exited:\n{child.log_tail()}")
        if run.initialize_ok(url):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{child.name} did not answer at {url}:\n{child.log_tail()}")


def transactions(database_url):
    """Committed transactions of the database so far (PostgreSQL), else None."""
    if not database_url.startswith(("postgres://", "postgresql://")):
        return None
    import psycopg  # noqa: PLC0415

    with psycopg.connect(database_url, autocommit=True) as connection:
        return connection.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
                                  ).fetchone()[0]


def calls(redis) -> dict:
    return redis.commandstats() if redis else {}


def per_session(before: dict, after: dict, sessions: int) -> dict:
    """{command: calls per session} of what a Redis ran between two samples."""
    spent = {name: count - before.get(name, 0) for name, count in after.items()}
    return {name: round(count / sessions, 2) for name, count in sorted(spent.items(), key=lambda kv: -kv[1]) if count}


def one_round(name, port, env, args, data, app, out_dir, number):
    url = f"http://{run.HOST}:{port}/mcp"
    child = run.Child(name, pinned(server_command(name, port), "0"), env=env, cwd=str(run.ROOT),
                      log_path=out_dir / f"{name}.{number}.log").start()
    try:
        wait_http(url, child)
        before = (calls(data), calls(app), transactions(args.database_url), run.cpu_seconds(child.pid), time.monotonic())
        load = subprocess.Popen(pinned([sys.executable, str(HERE / "load.py"), "--url", url, "--users", str(args.users),
                                        "--seconds", str(args.seconds), "--warmup", str(args.warmup),
                                        "--era", "2026-07-28" if name.endswith(MODERN_SUFFIX) else "sessions"], "1"),
                                stdout=subprocess.PIPE, text=True)
        if args.profile and number == 0:
            profile(name, child, args, out_dir)
        stdout, _ = load.communicate()
        if load.returncode:
            raise RuntimeError(f"load.py against {name} exited {load.returncode}")
        after = (calls(data), calls(app), transactions(args.database_url), run.cpu_seconds(child.pid), time.monotonic())
    finally:
        child.stop()
    result = json.loads(stdout.strip().splitlines()[-1])
    # Counted over the whole load (warm-up and ramp-down too), divided by the sessions of all of it.
    sessions = max(1, round(result["sessions"] * (after[4] - before[4]) / result["wall_s"]))
    data_commands, app_commands = per_session(before[0], after[0], sessions), per_session(before[1], after[1], sessions)
    result.update(target=name, round=number, server_cpu_pct=round(100 * (after[3] - before[3]) / (after[4] - before[4]), 1),
                  data_redis_cmds_per_session=round(sum(data_commands.values()), 1),
                  app_redis_cmds_per_session=round(sum(app_commands.values()), 1) if name != "fastmcp" else 0,
                  app_redis_commands=app_commands if name != "fastmcp" else {},
                  db_transactions_per_session=(round((after[2] - before[2]) / sessions, 2)
                                               if before[2] is not None and name != "fastmcp" else None))
    return result


def profile(name, child, args, out_dir):
    """py-spy on the server for --profile seconds of the first round's load, after its warm-up."""
    py_spy = run.find_py_spy()
    if py_spy is None:
        run.log("--profile: no py-spy (set PY_SPY, or pip install py-spy)")
        return
    time.sleep(args.warmup)
    raw = out_dir / f"pyspy-{name}.txt"
    subprocess.run([py_spy, "record", "--pid", str(child.pid), "--duration", str(int(args.profile)), "--rate", "200",
                    "--threads", "--format", "raw", "--output", str(raw)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    report = run.profile_report(name, run.analyse_collapsed(raw, 200), duration=args.profile)
    (out_dir / f"pyspy-{name}.md").write_text(report + "\n")
    run.log(f"profile of {name}: {run.rel(out_dir / f'pyspy-{name}.md')}")


KEYS = ["iterations_per_s", "mcp_rps", "http_rps", "call_ms_p50", "call_ms_p99", "errors", "server_cpu_pct",
        "data_redis_cmds_per_session", "app_redis_cmds_per_session", "db_transactions_per_session"]


def table(results, targets):
    lines = ["| target | " + " | ".join(KEYS) + " | vs fastmcp it/s |", "|---" * (len(KEYS) + 2) + "|"]
    medians = {}
    for name in targets:
        mine = [r for r in results if r["target"] == name]
        medians[name] = {k: statistics.median([r[k] for r in mine if r.get(k) is not None] or [0]) for k in KEYS}
    anchor = medians.get("fastmcp", {}).get("iterations_per_s")
    for name in targets:
        ratio = f"{medians[name]['iterations_per_s'] / anchor:.2f}x" if anchor else "–"
        lines.append(f"| {name} | " + " | ".join(str(medians[name][k]) for k in KEYS) + f" | {ratio} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--targets", default=",".join(TARGETS),
                        help=f"of {', '.join(TARGETS)}; ours with {MODERN_SUFFIX} (ours-daphne{MODERN_SUFFIX}): "
                             "the same calls in the stateless 2026-07-28 era")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--warmup", type=float, default=10)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--profile", type=float, default=0,
                        help="py-spy each target's server for S seconds of its first round (after the warm-up)")
    parser.add_argument("--database-url", default="", help="ours' database (PostgreSQL: transactions are counted)")
    args = parser.parse_args()
    targets = [t for t in args.targets.split(",") if t]
    out_dir = run.OUT_ROOT / (datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-tmdevlab")
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="tmdevlab-"))
    data = app = api = None
    results = []
    try:
        data, app = run.Redis(out_dir).start(), run.Redis(out_dir).start()
        seed.seed(data.url)
        api_port = run.free_port()
        api = run.Child("api", pinned([sys.executable, str(HERE / "api.py"), "--port", str(api_port)], "1"),
                        env=dict(os.environ), cwd=str(HERE), log_path=out_dir / "api.log").start()
        database_url = args.database_url or f"sqlite:///{tmp / 'bench.sqlite3'}"
        env = dict(os.environ, REDIS_URL=app.url, DATABASE_URL=database_url, DJANGO_SETTINGS_MODULE="bench_settings",
                   PYTHONPATH=os.pathsep.join([str(HERE), str(run.ROOT)]), DJANGO_DEBUG="0", PYTHONUNBUFFERED="1",
                   DJANGO_SECRET_KEY="tmdevlab-" + "x" * 50, API_SERVICE_URL=f"http://{run.HOST}:{api_port}",
                   BENCH_DATA_REDIS_URL=data.url, MCP_MAX_SESSIONS_PER_ADDRESS="1000000",
                   MCP_REQUEST_RATE_LIMIT="off", MCP_SESSION_OPEN_RATE="off")  # one address sends it all
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=run.ROOT, env=env, check=True)
        for number in range(args.repeat):
            for name in (targets if number % 2 == 0 else list(reversed(targets))):
                result = one_round(name, run.free_port(), env, args, data, app, out_dir, number)
                results.append(result)
                print(json.dumps(result), flush=True)
                with open(out_dir / "tmdevlab.jsonl", "a") as f:
                    f.write(json.dumps(result) + "\n")
    finally:
        for part in (api, data, app):
            if part is not None:
                part.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nbench/tmdevlab/run.py {' '.join(sys.argv[1:])}  (raw: {run.rel(out_dir)}/tmdevlab.jsonl)")
    print(table(results, targets))


if __name__ == "__main__":
    main()
