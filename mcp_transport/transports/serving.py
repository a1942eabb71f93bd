"""What the app needs from the ASGI server in front of it.

``flush_events_at_shutdown()``, ``enforce_request_limits()`` and ``draining.drain_on_sigterm()``
run by themselves under daphne (``AppConfig.ready``); ``lifespan`` does the first and the last
under uvicorn (routing.py exports it).
``tune_daphne()`` and ``tune_gc()`` are opt-in tuning; call them from the project's asgi.py
(``tune_gc()`` last, once the application is built)::

    from mcp_transport.transports.serving import tune_daphne, tune_gc
    tune_daphne()
    application = ...
    tune_gc()
"""
import asyncio
import functools
import gc
import logging
import sys

from . import tcp_writes

logger = logging.getLogger(__name__)

#: ``gc.set_threshold`` of a serving process: allocations between young collections (Python's
#: default 700), young collections per middle one, middle ones per full one (Python's 10, 10).
GC_THRESHOLDS = (200_000, 20, 10)


def tune_gc(thresholds=GC_THRESHOLDS) -> None:
    """Collect garbage less often, and never again scan what the process loaded at start.

    Each of 1,000 open streams keeps tasks, futures, timers and buffers alive, so Python's
    collector, run every 700 allocations, kept finding a large young generation to move and
    full collections of about a million objects to scan: 57 s of one 120 s run of issue 19's
    1,000 x 10 s streams (3,364 collections, by ``gc.callbacks``), against 2.6 s (13) with a
    young generation of 50,000. daphne keeps each finished request's objects (its Twisted
    request, ASGI queue and task) until its application checker reaps them, once a second: at
    2,500 requests a second some 100,000 objects come and go between reapings, so a young
    generation of 50,000 was collected twice a second for nothing (4 % of a busy process); at
    200,000 a young collection waits for real growth. ``gc.freeze()`` moves what start-up loaded
    (Django, Twisted, the app: objects that live as long as the process) out of every later
    collection. Cyclic garbage still goes, later: some tens of megabytes more at most (a served
    request leaves none; tests/unit/transports/test_garbage.py)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*thresholds)

def tune_daphne() -> bool:
    """Memoise Twisted's Content-Type parsing, and send on TCP at once when nothing is queued.

    Twisted's ``Request.requestReceived`` parses each POST's Content-Type with
    ``email.message.EmailMessage`` to look for form bodies, which daphne never reads (it takes
    the raw body). ``_parseContentType`` is a pure function of the header value, so a bounded
    cache changes nothing but the cost: about 115 µs per request, 12 % of an echo call
    (bench/RESULTS.md). Returns False when Twisted is not installed or has changed.

    See ``tcp_writes.send_at_once`` for the writes.
    """
    try:
        from twisted.internet import tcp
        from twisted.web import http as twisted_http
    except ImportError:
        return False
    parse = getattr(twisted_http, "_parseContentType", None)
    if parse is None or not hasattr(tcp.Connection, "writeSomeData"):
        return False
    if not hasattr(parse, "cache_info"):
        twisted_http._parseContentType = functools.lru_cache(maxsize=64)(_never_raising(parse))
    tcp_writes.send_at_once(tcp.Connection)
    return True


def _never_raising(parse):
    """``parse``, answering b"" for a value ``email.message`` refuses: one holding a character
    ``str.splitlines`` breaks at (``\x0b``, ``\x0c``, ``\x1c``...) raises ValueError, and Twisted
    then drops the connection without a response (found by tests/fuzz). With b"" the request
    goes on, and gets an answer: daphne's 400 for the header value, or the app's 415."""
    @functools.wraps(parse)
    def parse_content_type(line):
        try:
            return parse(line)
        except ValueError:
            return b""
    return parse_content_type


def enforce_request_limits() -> bool:
    """Under daphne, enforce the request limits while requests arrive (request_limits.py):
    body size before the body is read, header size, the receive deadline, the idle timeout.
    False (and nothing done) when daphne is not what serves this process."""
    module = sys.modules.get("daphne.http_protocol")
    if module is None or not hasattr(module, "HTTPFactory"):
        return False
    from .request_limits import install

    return install(module.HTTPFactory)


CLOSE_REQUEST_CONNECTIONS = "mcp_transport.close_request_connections"


def close_connections_after_django_requests() -> None:
    """Under ASGI, close the database connections a Django view opened when its request ends.

    Django's ASGI handler runs each request's sync code (a sync view, sync middleware, the
    admin, the authorization server's /o/ views) in a thread of that request's own
    (``ThreadSensitiveContext``). Its ``close_old_connections`` at request end keeps a
    connection younger than CONN_MAX_AGE, but nothing ever uses it again: the thread is gone,
    and the connection stays open until a garbage collection finds it (under ``tune_gc``,
    rarely). 126 anonymous registrations held 96 of PostgreSQL's 100 connections. Closing
    them here, in the request's thread, leaves CONN_MAX_AGE to the threads that live on and
    are bounded: Channels' one sync thread, the auth threads, the tool lanes, the probe's."""
    from django.core.signals import request_finished

    request_finished.connect(_close_request_connections, dispatch_uid=CLOSE_REQUEST_CONNECTIONS)


def closes_request_connections() -> bool:
    """Whether the connections of Django's requests close at their end (checks.py: W011)."""
    from django.core.signals import request_finished

    return any(key[0] == CLOSE_REQUEST_CONNECTIONS for key, *_ in request_finished.receivers)


def _close_request_connections(sender, **kwargs) -> None:
    from django.core.handlers.asgi import ASGIHandler
    from django.db import connections

    if not (isinstance(sender, type) and issubclass(sender, ASGIHandler)):
        return  # WSGI: the server's threads live on and reuse their connections
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:  # an enclosing transaction's (a test's) stays
            connection.close()


def flush_events_at_shutdown() -> bool:
    """Under daphne, write the events (and the sessions' and calls log's rows) still waiting for
    the database before the process exits.

    The Redis store batches its database writes (``persist="batched"``), so a SIGTERM would
    drop up to ``flush_interval`` seconds of rows that Redis still holds. daphne sends no ASGI
    lifespan events; Twisted runs "before shutdown" triggers, and waits for the Deferred they
    return, while the loop still runs. Under uvicorn (or any server that speaks the ASGI
    lifespan protocol) ``lifespan`` below does it. Returns False (and does nothing) when no
    Twisted reactor is installed: Celery, manage.py, uvicorn."""
    reactor = sys.modules.get("twisted.internet.reactor")
    if reactor is None or not hasattr(reactor, "addSystemEventTrigger"):
        return False
    reactor.addSystemEventTrigger("before", "shutdown", _flush_for_twisted)
    return True


async def lifespan(scope, receive, send) -> None:
    """The ASGI lifespan protocol, for ``ProtocolTypeRouter({..., "lifespan": lifespan})``:
    at startup, drain on SIGTERM (draining.py: the calls running finish first); at shutdown,
    wait for the drain, then write the rows still waiting for the database, as daphne's trigger
    does. uvicorn stops its loop without cancelling the app's tasks, so without it a SIGTERM
    dropped them (tests/integration/test_uvicorn.py)."""
    from . import draining

    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            draining.drain_on_sigterm_under_uvicorn()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            try:
                await draining.drained()  # a 2025-11-25 call whose client left has no connection to wait for
                await _flush_rows()
            except Exception as exc:  # the database is down: say so, the server exits anyway
                logger.exception("writing the rows still waiting for the database at shutdown failed")
                return await send({"type": "lifespan.shutdown.failed", "message": str(exc)})
            return await send({"type": "lifespan.shutdown.complete"})


def _flush_for_twisted():
    from twisted.internet.defer import Deferred

    return Deferred.fromFuture(asyncio.ensure_future(_flush_rows()))


async def _flush_rows():
    from ..running import calls
    from ..state import sessions
    from ..storage import flush_all

    await sessions.flush_rows()  # the sessions' rows first: the events' rows name them
    await flush_all()
    await calls.flush()  # the calls log's unwritten rows too
