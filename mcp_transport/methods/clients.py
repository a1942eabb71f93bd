"""Clients a project's tools share across calls: ``@per_process``.

A tool that talks to Redis or to an HTTP API should not connect for every call: a client made per
call pays a connection (and a TLS handshake) each time, and one looked up in a registry per
command pays that lookup on every command. ``per_process`` makes the client once, at its first
use, and hands the same object to every later call of the process, so a call's commands go
straight to a warm connection pool.

An asyncio client belongs to the event loop it first connects on: its connections' streams are
that loop's. A web process (daphne, uvicorn) runs one loop, so it makes one client. A Celery
worker runs each background call of an async tool on a loop of its own (asgiref's
``async_to_sync``), so there a client is made per call, on that call's loop, and dropped with the
loop. Sync code with no running loop (a sync tool in its worker thread) gets one client per
thread: a sync client is not shared across threads unless its library says so.

Health checks are the client's own business: redis-py's ``health_check_interval`` is 0 by
default (no ``PING`` before a command), and an HTTP client reuses kept-alive connections.
"""
import asyncio
import functools
import threading
import weakref

__all__ = ["per_process"]


def per_process(make):
    """Decorate a function that makes a client: calling it returns the process's client (made by
    the first call on the running event loop, or in the current thread when no loop runs).

        @per_process
        def weather_api() -> aiohttp.ClientSession:
            return aiohttp.ClientSession(base_url="https://api.example.com")

        @tool
        async def forecast(city: str) -> str:
            async with weather_api().get("/forecast", params={"city": city}) as response:
                ...

    ``weather_api.made()`` lists the clients made so far that are still in use (for a shutdown
    hook that closes them); ``weather_api.forget()`` drops them, so the next call makes a new
    one (a test that changed the settings it reads)."""
    return _PerProcess(make)


class _PerProcess:
    """The clients of one ``per_process`` function: by event loop, else by thread."""

    def __init__(self, make):
        functools.update_wrapper(self, make)
        self._make = make
        self._lock = threading.Lock()  # two threads' first calls make one client each, never a mix
        self.forget()

    def forget(self) -> None:
        with self._lock:
            self._by_loop = weakref.WeakKeyDictionary()
            self._by_thread = threading.local()
            # The last loop asked for and its client: a web process's one loop finds its client
            # with an identity check, not a weak-dictionary lookup.
            self._last = (None, None)

    def made(self) -> list:
        with self._lock:
            return [client for loop, client in list(self._by_loop.items()) if not loop.is_closed()]

    def __call__(self):
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return self._for_thread()
        last_loop, client = self._last
        if loop is last_loop:
            return client
        return self._for_loop(loop)

    def _for_loop(self, loop):
        with self._lock:
            client = self._by_loop.get(loop)
            if client is None:
                for other in [other for other in self._by_loop if other.is_closed()]:
                    del self._by_loop[other]  # a Celery call's loop ended: its client goes with it
                client = self._by_loop[loop] = self._make()
            self._last = (loop, client)
            return client

    def _for_thread(self):
        client = getattr(self._by_thread, "client", None)
        if client is None:
            client = self._by_thread.client = self._make()
        return client
