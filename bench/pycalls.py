#!/usr/bin/env python3
"""Python function calls per echo call, counted by cProfile in process: deterministic where wall
clock on a shared machine is not (issue 39 sets the budgets: <= 450 in 2026-07-28, <= 850 in
2025-11-25).

    .venv/bin/python bench/pycalls.py                    # both eras, this checkout
    .venv/bin/python bench/pycalls.py --top 40           # and the functions that cost the most calls
    .venv/bin/python bench/pycalls.py --at base=f563ce4  # and a git revision, side by side

Each count runs bench/instructions.py's driver (echo posted through the project's ASGI
application in process, daphne left out) in a child process: ``--warm`` calls first (start-up and
first-use caches left out), then ``--calls`` more under cProfile, and prints the profile's total
function calls (primitive and recursive, builtins included) divided by ``--calls``. Same private
Redis, new SQLite database and settings as instructions.py (the calls log sampled off).
"""
import argparse
import asyncio
import cProfile
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

import instructions  # noqa: E402  (bench/instructions.py: the driver and the worktrees)

MODERN, LEGACY = instructions.MODERN, instructions.LEGACY


def profile_main(era: str, warm: int, calls: int, top: int) -> None:
    """(In the child, in the checkout counted) warm up, then profile ``calls`` more calls."""
    import django

    sys.path.insert(0, os.getcwd())
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mcpserver.settings")
    django.setup()
    profiler = cProfile.Profile()

    async def both():
        await instructions.drive(era, warm)
        profiler.enable()
        await instructions.drive(era, calls, first=warm + 1, session=False)
        profiler.disable()

    asyncio.run(both())
    stats = pstats.Stats(profiler)
    print(json.dumps({"total": stats.total_calls}))
    if top:
        stats.sort_stats("ncalls").print_stats(top)


def count(checkout: Path, era: str, args, env: dict) -> float:
    out = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), str(Path(__file__).resolve()), "--profile", era,
                          str(args.warm), str(args.calls), str(args.top)],
                         cwd=checkout, env={**env, "PYTHONPATH": str(checkout)}, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"profiling {checkout} ({era}) failed:\n{out.stderr[-3000:]}")
    first, _, rest = out.stdout.partition("\n")
    if args.top:
        print(rest)
    return json.loads(first)["total"] / args.calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--at", action="append", default=[], metavar="NAME=REV", help="also count a git revision")
    parser.add_argument("--eras", default=f"{MODERN},{LEGACY}")
    parser.add_argument("--warm", type=int, default=100)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--top", type=int, default=0, help="print the N functions called most")
    args = parser.parse_args()
    import run  # bench/run.py: a private Redis

    out_dir = run.OUT_ROOT / (time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-pycalls")
    out_dir.mkdir(parents=True, exist_ok=True)
    checkouts = [("this checkout", ROOT)] + [(name, instructions.worktree(name, rev)) for name, rev in
                                             (spec.split("=", 1) for spec in args.at)]
    redis = run.Redis(out_dir).start()
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for name, checkout in checkouts:
                env = dict(os.environ, REDIS_URL=redis.url, DJANGO_SETTINGS_MODULE="mcpserver.settings",
                           DATABASE_URL=f"sqlite:///{tmp}/{name.replace(' ', '-')}.sqlite3", DJANGO_DEBUG="0",
                           DJANGO_SECRET_KEY="pycalls-" + "x" * 50, **({} if os.environ.get("PYCALLS_LOGLEVEL") else {"MCP_LOG_LEVEL": "WARNING"}),
                           **({} if os.environ.get("PYCALLS_LOG") else {"MCP_TRANSPORT_JSON": json.dumps({"CALL_LOG_SAMPLE": 0})}))
                instructions.prepare(checkout, env)
                for era in args.eras.split(","):
                    per_call = count(checkout, era, args, env)
                    rows.append((name, era, per_call))
                    print(f"{name:>16}  {era}  {per_call:.0f} Python function calls per echo call", flush=True)
    finally:
        redis.stop()
    print("\n| checkout | era | Python function calls per echo call |\n|---|---|---|")
    for name, era, per_call in rows:
        print(f"| {name} | {era} | {per_call:.0f} |")


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--profile":
        profile_main(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    else:
        main()
