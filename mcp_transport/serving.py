"""What the app needs from the ASGI server in front of it.

``flush_events_at_shutdown()`` runs by itself (``AppConfig.ready``). ``tune_daphne()`` is
opt-in tuning; call it from the project's asgi.py::

    from mcp_transport.serving import tune_daphne
    tune_daphne()
"""
import asyncio
import functools
import sys


def tune_daphne() -> bool:
    """Memoise Twisted's Content-Type parsing, which daphne pays on every POST.

    Twisted's ``Request.requestReceived`` parses each POST's Content-Type with
    ``email.message.EmailMessage`` to look for form bodies, which daphne never reads (it takes
    the raw body). ``_parseContentType`` is a pure function of the header value, so a bounded
    cache changes nothing but the cost: about 115 µs per request, 12 % of an echo call
    (bench/RESULTS.md). Returns False when Twisted is not installed or has changed.
    """
    try:
        from twisted.web import http as twisted_http
    except ImportError:
        return False
    parse = getattr(twisted_http, "_parseContentType", None)
    if parse is None or hasattr(parse, "cache_info"):
        return parse is not None
    twisted_http._parseContentType = functools.lru_cache(maxsize=64)(parse)
    return True


def flush_events_at_shutdown() -> bool:
    """Under daphne, write the events still waiting for the database before the process exits.

    The Redis store batches its database writes (``persist="batched"``). Under uvicorn the loop
    cancels the batching task at shutdown, which then writes what waits; daphne sends no ASGI
    lifespan events and stops its loop without cancelling anything, so a SIGTERM would drop
    up to ``flush_interval`` seconds of rows that Redis still holds. Twisted runs "before
    shutdown" triggers, and waits for the Deferred they return, while the loop still runs.
    Returns False (and does nothing) when no Twisted reactor is installed: Celery, manage.py,
    uvicorn."""
    reactor = sys.modules.get("twisted.internet.reactor")
    if reactor is None or not hasattr(reactor, "addSystemEventTrigger"):
        return False
    reactor.addSystemEventTrigger("before", "shutdown", _flush_for_twisted)
    return True


def _flush_for_twisted():
    from twisted.internet.defer import Deferred

    from .storage import flush_all

    return Deferred.fromFuture(asyncio.ensure_future(flush_all()))
