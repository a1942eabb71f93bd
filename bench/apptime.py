#!/usr/bin/env python3
"""Microseconds of the application per echo call, timed in process: the project's ASGI app
served one request after another, daphne and the network left out (their cost does not change
with ours). Steadier than a load test here (run to run within 2-3 %), so a change of a few
microseconds shows; it counts wall time, so run it on a quiet machine.

    .venv/bin/python bench/apptime.py                       # 2026-07-28, this checkout
    .venv/bin/python bench/apptime.py --era 2025-11-25      # (wall time: its Redis round trip too)

After ``--warm`` calls, ``--rounds`` rounds of ``--calls`` calls each, their bodies made
beforehand; prints each round's microseconds a call and their median. Uses the same private
Redis, new SQLite database and settings as bench/pycalls.py (the calls log sampled off,
REQUEST_RATE_LIMIT off).
"""
import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

import instructions  # noqa: E402  (bench/instructions.py: the driver)


async def timed_rounds(era: str, warm: int, rounds: int, calls: int) -> list:
    from mcpserver.asgi import application

    await instructions.drive(era, warm)
    headers = instructions._SESSIONS[era] if era == instructions.LEGACY else instructions.MODERN_HEADERS
    asgi_scope = instructions.scope(headers)
    first = warm + 1
    per_call = []
    for _ in range(rounds):
        bodies = [json.dumps(instructions.echo_call(era, n)).encode() for n in range(first, first + calls)]
        first += calls
        started = time.perf_counter()
        for body in bodies:
            await instructions.exchange(application, dict(asgi_scope), body)
        per_call.append((time.perf_counter() - started) / calls * 1e6)
    return per_call


def child(era: str, warm: int, rounds: int, calls: int) -> None:
    import django

    sys.path.insert(0, os.getcwd())
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mcpserver.settings")
    django.setup()
    print(json.dumps(asyncio.run(timed_rounds(era, warm, rounds, calls))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--era", default=instructions.MODERN)
    parser.add_argument("--warm", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.era, args.warm, args.rounds, args.calls)
    import run  # bench/run.py: a private Redis

    out_dir = run.OUT_ROOT / (time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-apptime")
    out_dir.mkdir(parents=True, exist_ok=True)
    redis = run.Redis(out_dir).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, REDIS_URL=redis.url, DJANGO_SETTINGS_MODULE="mcpserver.settings",
                       DATABASE_URL=f"sqlite:///{tmp}/apptime.sqlite3", DJANGO_DEBUG="0",
                       DJANGO_SECRET_KEY="apptime-" + "x" * 50, MCP_LOG_LEVEL="WARNING",
                       MCP_REQUEST_RATE_LIMIT="off", MCP_TRANSPORT_JSON=json.dumps({"CALL_LOG_SAMPLE": 0}))
            instructions.prepare(ROOT, env)
            out = subprocess.run([sys.executable, __file__, "--child", "--era", args.era, "--warm", str(args.warm),
                                  "--rounds", str(args.rounds), "--calls", str(args.calls)],
                                 cwd=ROOT, env=env, capture_output=True, text=True)
    finally:
        redis.stop()
    if out.returncode:
        raise SystemExit(f"timing failed:\n{out.stderr[-3000:]}")
    rounds = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"{args.era}: {statistics.median(rounds):.1f} us of the application per echo call "
          f"(rounds: {', '.join(f'{r:.1f}' for r in rounds)})")


if __name__ == "__main__":
    main()
