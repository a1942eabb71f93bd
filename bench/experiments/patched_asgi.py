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

unknown = PATCHES - set(APPLIED)
if unknown:
    raise SystemExit(f"unknown BENCH_PATCHES: {', '.join(sorted(unknown))}")
print(f"[patched_asgi] patches applied: {', '.join(APPLIED) or 'none'}", flush=True)
