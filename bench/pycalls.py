#!/usr/bin/env python3
"""Python function calls per echo call, counted by cProfile in process: deterministic where wall
clock on a shared machine is not (issue 39 sets the budgets: <= 450 in 2026-07-28, <= 850 in
2025-11-25).

    .venv/bin/python bench/pycalls.py                    # both eras, this checkout
    .venv/bin/python bench/pycalls.py --top 40           # and the functions that cost the most calls
    .venv/bin/python bench/pycalls.py --at base=f563ce4  # and a git revision, side by side
    PYCALLS_SORT=tottime bench/pycalls.py --top 40       # the functions that take the most time
    PYCALLS_CALLERS='wait_for|timeout' bench/pycalls.py  # who calls the functions matching a pattern

Each count runs in a child process: bench/instructions.py's driver posts ``--warm`` echo calls
through the project's ASGI application in process (daphne left out; start-up and first-use
caches left out), then ``--calls`` more whose ASGI scope and body are made beforehand, with
cProfile on only while the application runs (the driver's ``receive`` and ``send`` are in the
count, the making of the requests is not), and prints the profile's total function calls
(primitive and recursive, builtins included) divided by ``--calls``. Same private Redis, new
SQLite database and settings as instructions.py (the calls log sampled off).

cProfile counts every resumption of a coroutine as a call: a request that waits for Redis once
counts each frame on its stack again when it resumes. The 2025-11-25 count varies by a few
per cent from run to run (how many times the read of Redis's answer yields); ``--repeat``
gives the spread.
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
        await profiled_calls(era, range(warm + 1, warm + 1 + calls), profiler)

    asyncio.run(both())
    stats = pstats.Stats(profiler)
    print(json.dumps({"total": stats.total_calls}))
    if top:
        stats.sort_stats(os.environ.get("PYCALLS_SORT", "ncalls")).print_stats(top)
    if os.environ.get("PYCALLS_CALLERS"):
        stats.print_callers(os.environ["PYCALLS_CALLERS"])


async def profiled_calls(era: str, numbers, profiler) -> None:
    """Echo calls of ``era`` (its session opened by the warm-up's ``drive``), profiled only while
    the ASGI application serves each."""
    from mcpserver.asgi import application

    headers = instructions._SESSIONS[era] if era == LEGACY else instructions.MODERN_HEADERS
    asgi_scope = instructions.scope(headers)
    for n in numbers:
        body = json.dumps(instructions.echo_call(era, n)).encode()
        answer = await instructions.exchange(application, dict(asgi_scope), body, profiler)
        instructions.check(answer["status"], answer["body"], f"call {n}")


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
    parser.add_argument("--repeat", type=int, default=1, help="count each era this many times (the 2025-11-25 spread)")
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
                    counts = sorted(fresh(redis.url) and count(checkout, era, args, env) for _ in range(args.repeat))
                    rows.append((name, era, counts))
                    print(f"{name:>16}  {era}  {spread(counts)} Python function calls per echo call", flush=True)
    finally:
        redis.stop()
    print("\n| checkout | era | Python function calls per echo call |\n|---|---|---|")
    for name, era, counts in rows:
        print(f"| {name} | {era} | {spread(counts)} |")


def fresh(url: str) -> bool:
    """Empty the private Redis: each count starts with no rate spent (REQUEST_RATE_LIMIT counts
    the driver's one address)."""
    import redis as redis_py

    redis_py.Redis.from_url(url).flushdb()
    return True


def spread(counts) -> str:
    low, high = round(counts[0]), round(counts[-1])
    return str(low) if low == high else f"{low}-{high}"


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--profile":
        profile_main(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    else:
        main()
