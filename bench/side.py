#!/usr/bin/env python3
"""Any mcpbench scenario (or bench/hold.py) against ours and the SDK anchor, side by side.

    .venv/bin/python bench/side.py --repeat 3 resume --tool slow_progress \
        --args '{"steps":30,"interval_ms":100}' --trials 20 --drop-after 10
    .venv/bin/python bench/side.py --repeat 2 streams --tool slow_progress \
        --args '{"steps":100,"interval_ms":100}' --streams 1000
    .venv/bin/python bench/side.py --targets daphne --repeat 1 hold --streams 5000
    .venv/bin/python bench/side.py --at before=HEAD~3 calls --tool echo --args '{"text":"hi"}'

Everything after the options is the scenario and its arguments; ``--url`` and ``--server-pid``
are added per target. Before every repeat each server is restarted (as bench/run.py does); the
targets run one after another, in reversed order on every other repeat. Prints each run's JSON
line (tagged with target, repeat and ``uptime``'s load) and, at the end, the medians of
``--keys``. Raw lines go to bench/out/<stamp>/side.jsonl. Servers, Redis and the throwaway
database come from bench/run.py.
"""
import argparse
import datetime
import json
import os
import secrets
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # noqa: E402 -- bench/run.py: Redis, Child, servers

DEFAULT_KEYS = {
    "calls": ["rps", "lat_ms_p50", "lat_ms_p99", "errors", "server_cpu_pct", "client_cpu_pct"],
    "resume": ["trials_exactly_once_in_order", "lost", "duplicated", "foreign_messages",
               "reconnect_headers_ms_p50", "reconnect_first_event_ms_p50", "reconnect_first_event_ms_p99"],
    "streams": ["results_ok", "events_received", "completion_ms_max", "first_event_ms_p50",
                "server_cpu_pct", "server_rss_mb_peak"],
    "hold": ["streams_held", "kib_per_stream", "kib_per_idle_session", "rss_mb_streams_open"],
}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--targets", default="daphne,sdk", help="comma list of daphne, uvicorn, sdk")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keys", help="comma list of summary keys to tabulate")
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE for our servers (repeatable)")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=SERVER:PATCH+PATCH",
                    help="add a target with bench-only patches (bench/experiments/patched_asgi.py), "
                         "as bench/run.py's --variant; e.g. floor=daphne:floor")
    ap.add_argument("--at", action="append", default=[], metavar="NAME=REV",
                    help="add a daphne target serving the project as it was at git revision REV (a "
                         "detached worktree made for the run), to compare commits side by side")
    ap.add_argument("--shared", default=str(run.SHARED_DEFAULT), help="folder of mcpbench.py and server_sdk.py")
    ap.add_argument("scenario", help="an mcpbench subcommand, hold, or modern (then an mcpbench subcommand, "
                                     "run on the 2026-07-28 wire by bench/modern.py)")
    ap.add_argument("rest", nargs=argparse.REMAINDER)
    return ap.parse_args()


def load():
    return os.getloadavg()


def scenario_command(args, url, pid, shared):
    if args.scenario == "hold":
        return [sys.executable, str(run.BENCH / "hold.py"), "--url", url, "--server-pid", str(pid), *args.rest]
    if args.scenario == "modern":  # an mcpbench scenario on the 2026-07-28 wire: modern calls ...
        scenario, *rest = args.rest
        return [sys.executable, str(run.BENCH / "modern.py"), scenario, "--url", url, "--server-pid", str(pid),
                *rest]
    return [sys.executable, str(shared / "mcpbench.py"), args.scenario, "--url", url,
            "--server-pid", str(pid), *args.rest]


def checkouts(specs, tmp):
    """``NAME=REV`` -> {name: the folder of a detached worktree of REV}; each server of such a
    target runs from its folder (daphne puts its working directory first on sys.path)."""
    found = {}
    for spec in specs:
        name, _, rev = spec.partition("=")
        if not name or not rev or name in run.TARGET_ALIASES:
            raise SystemExit(f"bad --at {spec!r}: want NAME=REV")
        folder = tmp / f"at-{name}"
        subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(folder), rev], cwd=run.ROOT, check=True)
        found[name] = folder
    return found


def drop_checkouts(found):
    for folder in found.values():
        subprocess.run(["git", "worktree", "remove", "--force", str(folder)], cwd=run.ROOT, check=False)


def main():
    args = parse_args()
    shared = Path(args.shared)
    os.environ["MCP_BENCH_SHARED"] = str(shared)  # for bench/modern.py
    variants = dict((name, (server, patches)) for name, server, patches in map(run.parse_variant, args.variant))
    targets = run._targets(",".join([args.targets, *variants]), variants)
    targets += [spec.partition("=")[0] for spec in args.at]
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out_dir = run.OUT_ROOT / f"{stamp}-side"
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="mcp-side-"))
    redis, lines = None, []
    at = checkouts(args.at, tmp)
    try:
        redis = run.Redis(out_dir).start()
        env = dict(os.environ, REDIS_URL=redis.url, DATABASE_URL=f"sqlite:///{tmp / 'bench.sqlite3'}",
                   DJANGO_SETTINGS_MODULE="mcpserver.settings", DJANGO_DEBUG="0", PYTHONUNBUFFERED="1",
                   # One address sends the whole load: the per-caller rates would measure themselves.
                   MCP_REQUEST_RATE_LIMIT="off", MCP_SESSION_OPEN_RATE="off")
        env.setdefault("DJANGO_SECRET_KEY", secrets.token_urlsafe(50))  # DEBUG off needs one
        env.update(item.split("=", 1) for item in args.env)
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=run.ROOT, env=env,
                       check=True)
        sdk_env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
        sdk_env.update(run.SDK_ENV, PYTHONUNBUFFERED="1")
        for repeat in range(args.repeat):
            order = targets if repeat % 2 == 0 else list(reversed(targets))
            for name in order:
                port = run.free_port()
                child_env = sdk_env if name == "sdk" else env
                if name in variants:
                    child_env = dict(env, BENCH_PATCHES=variants[name][1], PYTHONPATH=os.pathsep.join(
                        filter(None, [str(run.EXPERIMENTS), env.get("PYTHONPATH")])))
                command = run.server_commands("ours-daphne" if name in at else name, port, shared, variants)
                child = run.Child(name, command, env=child_env, cwd=str(at.get(name, run.ROOT)),
                                  log_path=out_dir / f"{name}.{repeat}.log")
                child.start()
                try:
                    url = f"http://{run.HOST}:{port}/mcp"
                    run.wait_ready(child, url)
                    before = load()
                    cmd = scenario_command(args, url, child.pid, shared)
                    run.log(shlex.join(cmd))
                    done = subprocess.run(cmd, cwd=run.ROOT, stdout=subprocess.PIPE, text=True, check=False)
                    summary = json.loads(done.stdout.strip().splitlines()[-1])
                    summary = {**summary.pop("result", {}), **summary}
                finally:
                    child.stop()
                summary.update(target=name, repeat=repeat, load_before=before[0], load_after=load()[0])
                lines.append(summary)
                print(json.dumps(summary), flush=True)
                with open(out_dir / "side.jsonl", "a") as f:
                    f.write(json.dumps(summary) + "\n")
    finally:
        if redis is not None:
            redis.stop()
        drop_checkouts(at)
    scenario = args.rest[0] if args.scenario == "modern" and args.rest else args.scenario
    keys = args.keys.split(",") if args.keys else DEFAULT_KEYS.get(scenario, [])
    print(f"\nside.py {shlex.join(sys.argv[1:])}  (raw: {run.rel(out_dir)}/side.jsonl)")
    print("| target | " + " | ".join(keys) + " | load 1m |")
    print("| --- " * (len(keys) + 2) + "|")
    for name in targets:
        mine = [line for line in lines if line["target"] == name]
        cells = []
        for key in keys:
            values = [line.get(key) for line in mine if isinstance(line.get(key), (int, float))]
            cells.append(f"{statistics.median(values):g} [{min(values):g}–{max(values):g}]" if values else "–")
        loads = [line["load_before"] for line in mine]
        print(f"| {name} | " + " | ".join(cells) + f" | {min(loads):.2f}–{max(loads):.2f} |")


if __name__ == "__main__":
    main()
