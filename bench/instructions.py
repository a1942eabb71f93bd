#!/usr/bin/env python3
"""Instructions per echo call, counted by valgrind: what a wall-clock run on a noisy machine
cannot tell apart (±15 % run to run here), instructions can.

    .venv/bin/python bench/instructions.py                      # both eras, this checkout
    .venv/bin/python bench/instructions.py --at base=41c88d4    # and a git revision, side by side

Each count runs ``valgrind --tool=callgrind`` on this file's ``--drive`` mode twice, with N and
M echo calls posted through the project's ASGI application in process (daphne left out: its part
does not change with ours), and prints (count(M) - count(N)) / (M - N): the cost of one more call,
start-up and warm-up left out. It uses a private Redis (``redis-server`` on a free port) and a
new SQLite database; the calls log is off (``CALL_LOG_SAMPLE`` 0: under valgrind every call's
row would be kept, at full speed the per-caller cap keeps a few a second). ``--at NAME=REV``
counts a revision from a detached worktree (bench/out/worktrees/), the same way.
"""
import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

MODERN = "2026-07-28"
LEGACY = "2025-11-25"


# -- the driver (runs under valgrind, in the checkout being counted) ---------------------------

def scope(headers: dict) -> dict:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
            "path": "/mcp", "raw_path": b"/mcp", "root_path": "", "query_string": b"",
            "client": ("127.0.0.1", 40000), "server": ("127.0.0.1", 8000),
            "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]}


async def post(application, headers: dict, message: dict) -> tuple:
    """One POST through the ASGI app: (status, response headers, body)."""
    answer = await exchange(application, scope(headers), json.dumps(message).encode())
    return answer["status"], answer["headers"], answer["body"]


async def exchange(application, asgi_scope: dict, body: bytes, profiler=None) -> dict:
    """One request through the ASGI app, its body made beforehand: {status, headers, body}.
    ``profiler`` (a cProfile.Profile, bench/pycalls.py) is on only while the app runs."""
    sent, answer = False, {"body": b"", "status": None, "headers": {}}

    async def receive():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client stays connected

    async def send(event):
        if event["type"] == "http.response.start":
            answer.update(status=event["status"], headers=dict(event["headers"]))
        elif event["type"] == "http.response.body":
            answer["body"] += event.get("body", b"")

    if profiler is not None:
        profiler.enable()
    try:
        await application(asgi_scope, receive, send)
    finally:
        if profiler is not None:
            profiler.disable()
    return answer


def check(status, body, what):
    if status not in (200, 202) or (body and b'"error"' in body and b'"result"' not in body):
        raise SystemExit(f"{what}: HTTP {status} {body[:300]!r}")


_SESSIONS = {}  # era -> the 2025-11-25 session's headers, for a second ``drive`` in one process
BASE_HEADERS = {"host": "127.0.0.1:8000", "content-type": "application/json",
                "accept": "application/json, text/event-stream"}
MODERN_HEADERS = {**BASE_HEADERS, "mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "echo"}
MODERN_META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
               "io.modelcontextprotocol/clientInfo": {"name": "instructions", "version": "1"}}


def echo_call(era: str, n: int) -> dict:
    """The echo ``tools/call`` number ``n`` of ``era`` (2026-07-28: with its ``_meta``)."""
    params = {"name": "echo", "arguments": {"text": "hi"}}
    if era == MODERN:
        params["_meta"] = MODERN_META
    return {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}


async def drive(era: str, calls: int, first: int = 1, session: bool = True) -> None:
    """``calls`` echo calls (ids from ``first``); a 2025-11-25 run opens its session first, or
    (``session`` False) reuses the one an earlier run in this process opened."""
    from mcpserver.asgi import application

    base = BASE_HEADERS
    if era == MODERN:
        headers = MODERN_HEADERS
    elif not session:
        headers = _SESSIONS[era]
    else:
        headers = dict(base)
        status, answer_headers, body = await post(application, base, {
            "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "instructions", "version": "1"}}})
        check(status, body, "initialize")
        headers.update({"mcp-session-id": answer_headers[b"mcp-session-id"].decode(), "mcp-protocol-version": LEGACY})
        status, _, body = await post(application, headers, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        check(status, body, "notifications/initialized")
        _SESSIONS[era] = headers
    for n in range(first, first + calls):
        status, _, body = await post(application, headers, echo_call(era, n))
        check(status, body, f"call {n}")


def drive_main(era: str, calls: int) -> None:
    import django

    sys.path.insert(0, os.getcwd())  # the checkout being counted (the counter runs it there)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mcpserver.settings")
    django.setup()
    asyncio.run(drive(era, calls))


# -- the counter ----------------------------------------------------------------------------

def count(checkout: Path, era: str, calls: int, env: dict) -> int:
    """Instructions valgrind counted for a whole driver run of ``calls`` calls."""
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                              str(ROOT / ".venv" / "bin" / "python"), str(Path(__file__).resolve()), "--drive", era,
                              str(calls)], cwd=checkout, env={**env, "PYTHONPATH": str(checkout)},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
        del tmp
    found = re.search(r"Collected : (\d+)", out.stderr)
    if out.returncode or not found:
        raise SystemExit(f"valgrind in {checkout} ({era}, {calls}) failed:\n{out.stderr[-2000:]}")
    return int(found.group(1))


def prepare(checkout: Path, env: dict) -> None:
    subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "manage.py", "migrate", "--noinput", "-v", "0"],
                   cwd=checkout, env={**env, "PYTHONPATH": str(checkout)}, check=True)


def worktree(name: str, rev: str) -> Path:
    path = ROOT / "bench" / "out" / "worktrees" / name
    if path.exists():
        subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, check=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "worktree", "add", "--detach", str(path), rev], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--at", action="append", default=[], metavar="NAME=REV", help="also count a git revision")
    parser.add_argument("--eras", default=f"{MODERN},{LEGACY}")
    parser.add_argument("--calls", default="100,600", help="N,M: the two runs whose difference is counted")
    args = parser.parse_args()
    few, many = (int(x) for x in args.calls.split(","))
    import run  # bench/run.py: a private Redis

    out_dir = run.OUT_ROOT / (time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-instructions")
    out_dir.mkdir(parents=True, exist_ok=True)
    checkouts = [("this checkout", ROOT)] + [(name, worktree(name, rev)) for name, rev in
                                             (spec.split("=", 1) for spec in args.at)]
    redis = run.Redis(out_dir).start()
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for name, checkout in checkouts:
                env = dict(os.environ, REDIS_URL=redis.url, DJANGO_SETTINGS_MODULE="mcpserver.settings",
                           DATABASE_URL=f"sqlite:///{tmp}/{name.replace(' ', '-')}.sqlite3", DJANGO_DEBUG="0",
                           DJANGO_SECRET_KEY="instructions-" + "x" * 50, MCP_LOG_LEVEL="WARNING",
                           MCP_TRANSPORT_JSON=json.dumps({"CALL_LOG_SAMPLE": 0}))
                prepare(checkout, env)
                for era in args.eras.split(","):
                    per_call = (count(checkout, era, many, env) - count(checkout, era, few, env)) / (many - few)
                    rows.append((name, era, per_call))
                    print(f"{name:>16}  {era}  {per_call / 1e6:.3f} M instructions per echo call", flush=True)
    finally:
        redis.stop()
    print("\n| checkout | era | instructions per echo call |\n|---|---|---|")
    for name, era, per_call in rows:
        print(f"| {name} | {era} | {per_call / 1e6:.3f} M |")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--drive":
        drive_main(sys.argv[2], int(sys.argv[3]))
    else:
        main()
