"""Stopping a web process without losing a call: what it does on SIGTERM, under daphne and uvicorn.

Theory of operation. A rolling deploy stops the web processes one at a time, with SIGTERM. Left
to itself, daphne's Twisted reactor stops at once on the signal and takes the calls it runs with
it (their clients then got the orphan's -32603 on another process, seconds later). Instead the
process drains (``drain``):

1. it stops taking connections: daphne's listening sockets close (uvicorn closes its own), so
   the kernel refuses new ones and a load balancer sends them to the other processes;
2. a request that still reaches it, on a connection opened before, gets 503 with
   ``Retry-After`` and ``Connection: close`` (endpoint.HttpEndpoint); a kept-alive connection
   closes now if it is idle, else after its response (request_limits.close_connections);
3. its held streams end with an SSE ``retry`` field (the spec's way to close a stream that has
   not ended): a session's GET stream, a resumed stream of a call that runs elsewhere, a
   background job's stream (the job goes on in its worker). Their clients reconnect, to another
   process, with ``Last-Event-ID``, and miss nothing: the events are in the shared event store.
   2026-07-28 listens and task streams end as they do when their token ends, with their result
   (running/drain.when_draining). The POST streams of calls that run here stay open: their
   answers go out on them;
4. the calls it runs finish (running/drain.py), for ``DRAIN_SECONDS`` at most; any still
   running then is answered with an error (-32000, in-band, stored like any answer);
5. what it still holds (HTTP+SSE streams: their session's answers went out on them) ends with a
   ``retry``, the connections close once their last bytes are out, and the process exits. A
   second SIGTERM stops it at once.

Under daphne this happens by itself: ``drain_on_sigterm()`` (``AppConfig.ready``) replaces the
reactor's SIGTERM handler before daphne runs it. Under uvicorn, the ``lifespan`` route does it
(serving.py): at startup it wraps uvicorn's own handler, which still runs at once (uvicorn closes
its sockets and idle connections, then waits for the busy ones, which the drain ends), and at
shutdown it waits for the drain before the rows still waiting for the database are written.
"""
import asyncio
import logging
import signal
import sys
import threading

from ..running import drain as calls_drain
from ..running import streams
from ..state import control

logger = logging.getLogger(__name__)

#: Seconds the answers of calls stopped at the deadline get to be written, and then the
#: connections to close once their responses are out, before the process exits anyway.
AFTER_DEADLINE_SECONDS = 5

#: The drain under way in this process (its task), and whether a SIGTERM came.
_drain_task = None
_signalled = False


def drain_on_sigterm() -> bool:
    """Under daphne, drain on SIGTERM instead of stopping at once. False (nothing done) when no
    Twisted reactor serves this process (Celery, manage.py, uvicorn)."""
    reactor = sys.modules.get("twisted.internet.reactor")
    if reactor is None or not hasattr(reactor, "sigTerm") or "daphne.server" not in sys.modules:
        return False
    if getattr(reactor, "drains_on_sigterm", False):
        return True
    stop_now = reactor.sigTerm  # Twisted's: the reactor stops at once

    def sig_term(number, frame=None):
        # Twisted installs ``reactor.sigTerm`` as the handler when it starts (after this runs:
        # daphne imports the application first); it runs between two bytecodes of the loop's thread.
        global _signalled
        if _signalled:
            return stop_now(number, frame)  # a second SIGTERM: stop now
        _signalled = True
        reactor.callFromThread(_start, _drain_daphne(reactor))

    reactor.sigTerm = sig_term
    reactor.drains_on_sigterm = True
    return True


def drain_on_sigterm_under_uvicorn() -> bool:
    """From the ASGI lifespan's startup: wrap the SIGTERM handler uvicorn installed, so that the
    drain starts with uvicorn's own shutdown. False when signals cannot be handled here (not the
    main thread) or no handler is there to wrap."""
    if threading.current_thread() is not threading.main_thread():
        return False
    previous = signal.getsignal(signal.SIGTERM)
    if not callable(previous) or getattr(previous, "drains", False):
        return False
    loop = asyncio.get_running_loop()

    def on_sigterm(number, frame):
        global _signalled
        if not _signalled:
            _signalled = True
            loop.call_soon_threadsafe(_start, drain())
        previous(number, frame)  # uvicorn: stop accepting, close idle connections, wait for busy ones

    on_sigterm.drains = True
    signal.signal(signal.SIGTERM, on_sigterm)
    return True


def _start(coroutine) -> asyncio.Task:
    global _drain_task
    if _drain_task is None:
        _drain_task = asyncio.ensure_future(coroutine)
    else:
        coroutine.close()
    return _drain_task


async def drained() -> None:
    """The drain, once over (run now if none began: uvicorn stopped on SIGINT)."""
    await _start(drain())


async def drain(seconds=None) -> int:
    """Steps 2 to 5 of the module's docstring, the server's part of them aside; returns how
    many calls were stopped at the deadline."""
    deadline = calls_drain.begin(seconds)
    running = calls_drain.calls_running()
    ended = end_held_streams(keep_running_calls=True)
    logger.info("stopping: %d call(s) running, %d held stream(s) ended with a retry", running, ended,
                extra={"mcp_calls_running": running, "mcp_streams_ended": ended})
    stopped = await calls_drain.settle(deadline, AFTER_DEADLINE_SECONDS)
    end_held_streams(keep_running_calls=False)
    return stopped


def end_held_streams(keep_running_calls: bool) -> int:
    """End the SSE streams this process writes, with a retry; ``keep_running_calls``: not those
    of calls that run here (their answers go out on them), nor HTTP+SSE's (they end last)."""
    ended = 0
    for (session_id, stream_key), held in list(control.writers.items()):
        runs_here = (session_id, stream_key) in streams.local_streams
        for writer in list(held):
            if keep_running_calls and (runs_here or not writer.ends_when_draining):
                continue
            writer.finish_with_retry()
            ended += 1
    return ended


async def _drain_daphne(reactor) -> None:
    """Close the listening sockets (step 1), drain, wait for the connections to close, stop."""
    from twisted.internet import tcp
    from twisted.internet.error import ReactorNotRunning

    from . import request_limits

    try:
        for reader in list(reactor.getReaders()):
            if isinstance(reader, tcp.Port):  # daphne's listening sockets (TCP, Unix, inherited)
                reader.stopListening()
        request_limits.close_connections()
        await drain()
        await _closed(request_limits.open_channels, AFTER_DEADLINE_SECONDS)
    except Exception:
        logger.exception("draining before the stop failed; stopping now")
    finally:
        try:
            reactor.stop()
        except ReactorNotRunning:  # a second SIGTERM stopped it already
            pass


async def _closed(connections, seconds: float) -> None:
    """Until every connection has closed (each closes once its response is written: Twisted
    drops what is unwritten when the reactor stops), for ``seconds`` at most."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while connections and loop.time() < end:
        await asyncio.sleep(0.05)
