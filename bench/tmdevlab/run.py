#!/usr/bin/env python3
"""TM Dev Lab v2's I/O-bound workload (http4k/benchmark-mcp-servers-v2), reproduced here, side by side:
our app under daphne and uvicorn against the newest FastMCP, in one run.

    .venv/bin/python bench/tmdevlab/run.py --repeat 3 --seconds 30

What runs: a Redis with the benchmark's data (seed.py), its HTTP API (api.py), and each server
in turn, pinned to the same core (``taskset -c 0``); everything else (this script, the load, the
API, both Redis servers) is kept off that core, so a server's core holds only the server and
whatever else the machine runs. Ours with the three tools as async ``@tool`` functions
(benchapp/, bench_settings.py: a project with only them), FastMCP 4 stateless with JSON replies
in a virtualenv of its own (bench/.venv-fastmcp, made or updated on a run with the pinned
versions of FASTMCP_PACKAGES). The load (load.py) is the benchmark's k6 sequence: 50 users, four
full sessions an iteration, content checks, 50 ms of think time. Rounds are interleaved (reversed
every other one); the medians are printed, with Redis commands per session (ours: the app's own
Redis apart from the data's) and, with a PostgreSQL ``--database-url``, database transactions per
session. The official Go SDK server is not built: this machine has no Go toolchain.

Besides the load's counts each round measures (measure.py), over the counted window: the server's
CPU and its CPU milliseconds an iteration, what else used the server's core, the API's, the
load's and Redis' CPU, the API's latency as a client sees it, and the load average. The table's
last two columns compare with FastMCP in the same era (``fastmcp-2026`` for a ``-2026`` target
when it runs, else ``fastmcp``): iterations a second, and CPU an iteration (its ms / the
target's), the one that moves least when neighbours take part of the core.

Neighbours do not slow every server alike: with others on the server's core the same pair came out
at 1.4x and at 3.6x, ~1.9x on a quiet core (bench/RESULTS.md, TM Dev Lab). So before each round the
script waits (up to ``--quiet-wait`` s) for the server's core to be used less than ``--max-others``
percent by others, and a round during which others took more than that of it is marked
``squeezed``; the medians are of the rounds that were not (of all, when every round was), and the
table says how many counted.
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
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import measure  # noqa: E402
import run  # noqa: E402 -- bench/run.py: Redis, Child, free_port
import seed  # noqa: E402

#: FastMCP's server and what it runs on, pinned (what ``pip install fastmcp uvicorn[standard] httpx redis``
#: gave on 2026-12-05) so a rerun measures the same code. sniffio: httpcore (httpx's transport) runs
#: ``import sniffio`` in each of its locks and events, several a request; anyio, which used to bring sniffio
#: along, no longer does, so each of those is a failed import that searches sys.path, ~10 % of the server's CPU
#: (py-spy). Installed, FastMCP runs at its own best speed.
FASTMCP_PACKAGES = ("fastmcp==4.2.3", "mcp==2.3.0", "uvicorn[standard]==0.55.0", "httpx==0.29.0", "httpcore==1.0.9",
                    "sniffio==1.3.1", "redis==8.2.0")
FASTMCP_VENV = run.BENCH / ".venv-fastmcp"
TARGETS = ("ours-daphne", "ours-uvicorn", "fastmcp")
#: A target's name with this suffix runs the load in the stateless 2026-07-28 era (ours and FastMCP 4,
#: whose mcp 2.3 serves it: one self-contained POST a call).
MODERN_SUFFIX = "-2026"
#: The core every server under test runs on; everything else this script starts runs on the others.
SERVER_CORE = 0


def fastmcp_python() -> str:
    """bench/.venv-fastmcp's python, the venv made or brought to FASTMCP_PACKAGES first."""
    python, stamp = FASTMCP_VENV / "bin" / "python", FASTMCP_VENV / "bench-packages.txt"
    wanted = "\n".join(FASTMCP_PACKAGES)
    if not python.exists():
        run.log(f"making {run.rel(FASTMCP_VENV)}")
        subprocess.run([sys.executable, "-m", "venv", str(FASTMCP_VENV)], check=True)
    if not stamp.exists() or stamp.read_text() != wanted:
        run.log(f"installing into {run.rel(FASTMCP_VENV)}: {' '.join(FASTMCP_PACKAGES)}")
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *FASTMCP_PACKAGES],
                       check=True)
        stamp.write_text(wanted)
    return str(python)


def other_cores() -> set:
    return set(os.sched_getaffinity(0)) - {SERVER_CORE}


def pinned(command, cpus):
    return ["taskset", "-c", cpus, *command] if shutil.which("taskset") and len(other_cores()) > 0 else command


def keep_off_server_core():
    """This process, and so all it starts unpinned (the Redis servers, migrate, the API probe), on the
    other cores: a Redis on the server's core would charge its CPU to whichever server uses it most."""
    if other_cores():
        os.sched_setaffinity(0, other_cores())


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


def load_command(name, url, args):
    return pinned([sys.executable, str(HERE / "load.py"), "--url", url, "--users", str(args.users),
                   "--seconds", str(args.seconds), "--warmup", str(args.warmup),
                   "--era", "2026-07-28" if name.endswith(MODERN_SUFFIX) else "sessions"], cores_text(other_cores()))


def cores_text(cores) -> str:
    return ",".join(str(core) for core in sorted(cores))


def counted_window(pids, args, api_url, start_profile):
    """Sleep through the load's warm-up, then measure its counted window (measure.py): {name_cpu_pct, ...}."""
    time.sleep(args.warmup + 0.5)  # load.py's clock starts after its own start-up (~0.3 s)
    probe = measure.ApiProbe(api_url)
    probe.start()
    finish_profile = start_profile()
    before = measure.Snapshot(pids, SERVER_CORE)
    time.sleep(max(1.0, args.seconds - 1.0))
    after = measure.Snapshot(pids, SERVER_CORE)
    if finish_profile is not None:
        finish_profile()
    return dict(measure.usage(before, after), **probe.stop(), loadavg_1m=round(os.getloadavg()[0], 2))


def wait_for_quiet_core(args):
    """Wait until the others use less than --max-others % of the server's core (at most --quiet-wait s)."""
    deadline = time.monotonic() + args.quiet_wait
    while (busy := measure.core_busy_pct(SERVER_CORE)) >= args.max_others:
        if time.monotonic() > deadline:
            run.log(f"core {SERVER_CORE} still {busy} % busy after {args.quiet_wait:.0f} s; running anyway")
            return
        time.sleep(3)


def one_round(name, port, env, args, parts, out_dir, number):
    url = f"http://{run.HOST}:{port}/mcp"
    wait_for_quiet_core(args)
    child = run.Child(name, pinned(server_command(name, port), str(SERVER_CORE)), env=env, cwd=str(run.ROOT),
                      log_path=out_dir / f"{name}.{number}.log").start()
    data, app, api = parts["data"], parts["app"], parts["api"]
    try:
        wait_http(url, child)
        before = (calls(data), calls(app), transactions(args.database_url), time.monotonic())
        load = subprocess.Popen(load_command(name, url, args), stdout=subprocess.PIPE, text=True)
        pids = {"server": child.pid, "api": api.pid, "load": load.pid, "data_redis": data.pid, "app_redis": app.pid}
        window = counted_window(pids, args, env["API_SERVICE_URL"],
                                lambda: profile(name, child, args, out_dir) if args.profile and number == 0 else None)
        stdout, _ = load.communicate()
        if load.returncode:
            raise RuntimeError(f"load.py against {name} exited {load.returncode}")
        after = (calls(data), calls(app), transactions(args.database_url), time.monotonic())
    finally:
        child.stop()
    result = json.loads(stdout.strip().splitlines()[-1])
    ours = not name.startswith("fastmcp")
    # Counted over the whole load (warm-up and ramp-down too), divided by the sessions of all of it.
    sessions = max(1, round(result["sessions"] * (after[3] - before[3]) / result["wall_s"]))
    data_commands, app_commands = per_session(before[0], after[0], sessions), per_session(before[1], after[1], sessions)
    result.update(target=name, round=number, profiled=bool(args.profile and number == 0), **window,
                  squeezed=window.get("others_on_core_pct", 0) > args.max_others,
                  server_cpu_ms_per_iteration=round(10 * window["server_cpu_pct"] / max(result["iterations_per_s"], 0.01), 2),
                  data_redis_cmds_per_session=round(sum(data_commands.values()), 1),
                  app_redis_cmds_per_session=round(sum(app_commands.values()), 1) if ours else 0,
                  app_redis_commands=app_commands if ours else {},
                  db_transactions_per_session=(round((after[2] - before[2]) / sessions, 2)
                                               if before[2] is not None and ours else None))
    return result


def profile(name, child, args, out_dir):
    """Start py-spy on the server for --profile seconds of the first round's counted window; return the
    function that waits for it and writes the report (that round's figures are the profiled ones)."""
    py_spy = run.find_py_spy()
    if py_spy is None:
        run.log("--profile: no py-spy (set PY_SPY, or pip install py-spy)")
        return None
    raw = out_dir / f"pyspy-{name}.txt"
    spy = subprocess.Popen([py_spy, "record", "--pid", str(child.pid), "--duration", str(int(args.profile)), "--rate",
                            "200", "--threads", "--format", "raw", "--output", str(raw)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def finish():
        spy.wait()
        report = run.profile_report(name, run.analyse_collapsed(raw, 200), duration=args.profile)
        (out_dir / f"pyspy-{name}.md").write_text(report + "\n")
        run.log(f"profile of {name}: {run.rel(out_dir / f'pyspy-{name}.md')}")

    return finish


KEYS = ["iterations_per_s", "mcp_rps", "http_rps", "call_ms_p50", "call_ms_p99", "errors", "server_cpu_pct",
        "server_cpu_ms_per_iteration", "others_on_core_pct", "api_cpu_pct", "api_ms_p50", "api_ms_p99", "load_cpu_pct",
        "data_redis_cpu_pct", "app_redis_cpu_pct", "loadavg_1m", "data_redis_cmds_per_session",
        "app_redis_cmds_per_session", "db_transactions_per_session"]


def anchor_of(name, targets):
    """The FastMCP target `name` is compared with: FastMCP in the same era when it runs."""
    same_era = "fastmcp" + MODERN_SUFFIX if name.endswith(MODERN_SUFFIX) else "fastmcp"
    return same_era if same_era in targets else "fastmcp"


def counted(results, name):
    """The rounds of `name` its medians are of: those not squeezed, or all when every one was."""
    mine = [r for r in results if r["target"] == name]
    return [r for r in mine if not r.get("squeezed")] or mine


def table(results, targets):
    lines = ["| target | rounds | " + " | ".join(KEYS) + " | vs fastmcp it/s | vs fastmcp CPU/it |",
             "|---" * (len(KEYS) + 4) + "|"]
    medians, rounds = {}, {}
    for name in targets:
        mine = counted(results, name)
        rounds[name] = f"{len(mine)}/{sum(r['target'] == name for r in results)}"
        medians[name] = {k: round(statistics.median([r[k] for r in mine if r.get(k) is not None] or [0]), 2)
                         for k in KEYS}
    for name in targets:
        anchor = medians.get(anchor_of(name, targets))
        speed = f"{medians[name]['iterations_per_s'] / anchor['iterations_per_s']:.2f}x" if anchor else "–"
        cost = (f"{anchor['server_cpu_ms_per_iteration'] / medians[name]['server_cpu_ms_per_iteration']:.2f}x"
                if anchor and medians[name]["server_cpu_ms_per_iteration"] else "–")
        lines.append(f"| {name} | {rounds[name]} | " + " | ".join(str(medians[name][k]) for k in KEYS) + f" | {speed} | {cost} |")
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
                        help="py-spy each target's server for S seconds of its first round (after the warm-up; "
                             "that round runs slower)")
    parser.add_argument("--max-others", type=float, default=10,
                        help="%% of the server's core others may use: waited for before a round, a round past it is "
                             "squeezed and left out of the medians (on a quiet machine others take 0-7 %%)")
    parser.add_argument("--quiet-wait", type=float, default=180, help="seconds to wait for that before each round")
    parser.add_argument("--database-url", default="", help="ours' database (PostgreSQL: transactions are counted)")
    args = parser.parse_args()
    targets = [t for t in args.targets.split(",") if t]
    out_dir = run.OUT_ROOT / (datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-tmdevlab")
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="tmdevlab-"))
    data = app = api = None
    results = []
    keep_off_server_core()
    if any(name.startswith("fastmcp") for name in targets):
        fastmcp_python()
    try:
        data, app = run.Redis(out_dir).start(), run.Redis(out_dir).start()
        seed.seed(data.url)
        api_port = run.free_port()
        api = run.Child("api", pinned([sys.executable, str(HERE / "api.py"), "--port", str(api_port)],
                                      cores_text(other_cores())),
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
                result = one_round(name, run.free_port(), env, args, {"data": data, "app": app, "api": api}, out_dir,
                                   number)
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
