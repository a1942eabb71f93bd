"""Bench-only ASGI entry point: ``mcpserver.asgi.application`` plus opt-in monkeypatches.

Used by ``bench/run.py --variant NAME=SERVER:PATCH+PATCH`` to measure what a change to the project
would gain before anyone makes it. Nothing in the project imports this module; the patches exist
only in the benchmark's server process. ``BENCH_PATCHES`` (comma or plus separated) selects them:

``ctype``      daphne only: cache ``twisted.web.http._parseContentType``. Twisted parses every POST's
               Content-Type with ``email.message.EmailMessage`` (for form decoding that daphne never
               uses, since ``Request(parsePOSTFormSubmission=True)`` is Twisted's default).
``noclose``    skip Channels' ``aclose_old_connections()`` in ``AsyncConsumer.dispatch``: a
               ``sync_to_async`` thread hop on every ASGI message, although the consumer never
               touches the ORM on the event loop (``database_sync_to_async`` closes connections
               itself).
``asyncecho``  run the ``echo`` tool as a coroutine (as the SDK anchor's ``async def echo`` is), so
               ``run_sync_or_async`` awaits it instead of hopping to an executor thread.
``floor``      CEILING ONLY, not our app: a bare ASGI callable that reads the POST, parses its JSON and
               answers the smallest valid reply (initialize, server/discover, tools/list, an echo
               of tools/call, 202 to notifications). What the server (daphne's Twisted, or
               uvicorn) allows at best on this machine, before any MCP work.
``chfloor``    CEILING ONLY: the same smallest replies from a Channels ``AsyncHttpConsumer`` (no
               Django middleware, no MCP): what the design's shell (Channels on the server) allows.
``nolog``      keep no calls-log row of a call that changes nothing (as ``CALL_LOG_SAMPLE`` 0 would,
               for this process only): what the calls log's 100 rows a second cost a busy server.
``gcstat``     MEASURES ONLY: every 5 s, the garbage collector's runs and their time, per generation, on
               stderr (the server's log in bench/out/).
``sessioncache`` UPPER BOUND ONLY, not a proposal as is: serve ``sessions.load`` from an in-process
               cache for 1 s, i.e. no Redis GETEX per request.
"""
import os
import time

from mcpserver.asgi import application  # noqa: F401  (sets Django up, autodiscovers the tools)

PATCHES = {p for p in os.environ.get("BENCH_PATCHES", "").replace("+", ",").split(",") if p}
APPLIED = []

if "ctype" in PATCHES:
    import functools

    import twisted.web.http as twisted_http

    twisted_http._parseContentType = functools.lru_cache(maxsize=256)(twisted_http._parseContentType)
    APPLIED.append("ctype")

if "noclose" in PATCHES:
    import channels.consumer

    async def _no_close_old_connections():
        return None

    channels.consumer.aclose_old_connections = _no_close_old_connections
    APPLIED.append("noclose")

if "asyncecho" in PATCHES:
    from mcp_transport.methods.registry import registry

    spec = registry.tools["echo"]
    if not spec.is_async:
        sync_echo = spec.func

        async def echo(text: str) -> str:
            return sync_echo(text)

        spec.func = echo
    APPLIED.append("asyncecho")

if "nolog" in PATCHES:
    from mcp_transport.running import calls

    calls._kept = lambda call, status, message: False
    APPLIED.append("nolog")

if "gcstat" in PATCHES:
    import gc
    import sys
    import threading

    _gc_seen, _gc_started = {0: [0, 0.0], 1: [0, 0.0], 2: [0, 0.0]}, {}

    def _gc_timer(phase, info):
        if phase == "start":
            _gc_started["at"] = time.perf_counter()
        else:
            seen = _gc_seen[info["generation"]]
            seen[0] += 1
            seen[1] += time.perf_counter() - _gc_started.pop("at", time.perf_counter())

    def _gc_report():
        while True:
            time.sleep(5)
            print("[gcstat]", {g: (n, round(s * 1000, 1)) for g, (n, s) in _gc_seen.items()},
                  "threshold", gc.get_threshold(), "counts", gc.get_count(), file=sys.stderr, flush=True)

    gc.callbacks.append(_gc_timer)
    threading.Thread(target=_gc_report, daemon=True).start()
    APPLIED.append("gcstat")

if "sessioncache" in PATCHES:
    from mcp_transport.state import sessions

    _load, _cache = sessions.load, {}

    async def cached_load(session_id):
        hit = _cache.get(session_id)
        now = time.monotonic()
        if hit is not None and hit[0] > now:
            return hit[1]
        record = await _load(session_id)
        if record is not None:
            _cache[session_id] = (now + 1.0, record)
        return record

    sessions.load = cached_load
    APPLIED.append("sessioncache")

FLOOR_RESULTS = {
    "initialize": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                   "serverInfo": {"name": "floor", "version": "0"}},
    "server/discover": {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}},
    "tools/list": {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]},
}


def floor_reply(body: bytes):
    """(status, headers, body) of the smallest valid reply to ``body`` (the ceiling patches)."""
    import json
    import secrets

    message = json.loads(body or b"{}")
    if "id" not in message:
        return 202, [], b""
    method = message.get("method")
    result = FLOOR_RESULTS.get(method) or {
        "content": [{"type": "text", "text": str((message.get("params") or {}).get("arguments"))}]}
    headers = [(b"content-type", b"application/json")]
    if method == "initialize":
        headers.append((b"mcp-session-id", secrets.token_hex(16).encode()))
    return 200, headers, json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()


if "floor" in PATCHES:
    async def floor(scope, receive, send):
        if scope["type"] != "http":
            return
        body, more = b"", True
        while more:
            event = await receive()
            body, more = body + event.get("body", b""), event.get("more_body", False)
        status, headers, reply = floor_reply(body)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": reply})

    application = floor  # noqa: F811
    APPLIED.append("floor")

if "chfloor" in PATCHES:
    from channels.generic.http import AsyncHttpConsumer

    class FloorConsumer(AsyncHttpConsumer):
        async def handle(self, body):
            status, headers, reply = floor_reply(body)
            await self.send_response(status, reply, headers=headers)

    application = FloorConsumer.as_asgi()  # noqa: F811
    APPLIED.append("chfloor")

unknown = PATCHES - set(APPLIED)
if unknown:
    raise SystemExit(f"unknown BENCH_PATCHES: {', '.join(sorted(unknown))}")
print(f"[patched_asgi] patches applied: {', '.join(APPLIED) or 'none'}", flush=True)
