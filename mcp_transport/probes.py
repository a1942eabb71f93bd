"""Probes for orchestrators and load balancers, served by the app's URLs (``mcp_transport.urls``):

- ``GET /healthz`` (liveness): 200 while the process serves requests. It touches neither Redis nor
  the database: the app rides out their outages (REDIS_OUTAGE_TOLERANCE,
  DATABASE_OUTAGE_TOLERANCE), and restarting its processes would not bring them back.
- ``GET /readyz`` (readiness): 200 when Redis answers a PING and the database a ``SELECT 1``, both
  sent at once and each given READINESS_CHECK_SECONDS (2 s); 503 otherwise, saying which did not
  answer. The next probe after they answer again is 200: nothing is remembered between probes.

A kubelet probes a pod at its IP address, which ALLOWED_HOSTS does not list, and over plain HTTP,
which SECURE_SSL_REDIRECT sends to HTTPS. ``ProbesMiddleware``, first in MIDDLEWARE, answers the
two paths before any other middleware runs (Django's host check happens where a middleware or view
calls ``request.get_host()``: CommonMiddleware, SecurityMiddleware's redirect, CSRF), so a probe
needs no Host header; nothing else is exempted.
"""
import asyncio
import concurrent.futures
import logging
import threading
import weakref

from asgiref.sync import async_to_sync, iscoroutinefunction, markcoroutinefunction
from django.http import HttpResponse, JsonResponse
from django.views.decorators.http import require_safe

from .conf import get_config
from .connections import probe_redis

log = logging.getLogger("mcp_transport.probes")

OK = "ok"
#: The PING in flight on each event loop: probes that arrive meanwhile wait for its answer rather
#: than queue for the probe client's two connections (a flood of probes stays one PING).
_pings = weakref.WeakKeyDictionary()
#: The database check in flight (a thread cannot be interrupted: one check at a time, and every
#: probe meanwhile waits for it within its own deadline).
_database_check = None
_database_lock = threading.Lock()
_database_executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-readyz")
#: What the last /readyz of this process answered: a change is logged, not every probe.
_was_ready = True


@require_safe
async def healthz_view(request):
    """200 while this process answers; Redis and the database are not asked."""
    return _uncached(HttpResponse("ok\n", content_type="text/plain"))


@require_safe
async def readyz_view(request):
    """200 ``{"redis": "ok", "database": "ok"}`` when both answered within
    READINESS_CHECK_SECONDS, else 503 with what each did ("no answer within 2 s", "failed
    (OperationalError)"); the errors themselves go to the log, not to whoever asks."""
    global _was_ready
    checks = await readiness()
    ready = all(state == OK for state, _ in checks.values())
    if ready != _was_ready:
        _was_ready = ready
        said = "; ".join(f"{name} {state}{f': {error}' if error else ''}" for name, (state, error) in checks.items())
        (log.info if ready else log.warning)("%s: %s", "ready" if ready else "not ready", said)
    response = _uncached(JsonResponse({name: state for name, (state, _) in checks.items()},
                                      status=200 if ready else 503))
    # Django would log each 503 at ERROR, a line per probe for the whole outage: the change of
    # readiness is logged above instead.
    response._has_been_logged = True
    return response


def _uncached(response):
    response["Cache-Control"] = "no-store"
    return response


async def readiness() -> dict:
    """{"redis": (state, error), "database": (state, error)}: what each did within
    READINESS_CHECK_SECONDS, "ok" (and no error) or why not."""
    seconds = float(get_config()["READINESS_CHECK_SECONDS"])
    redis_check, database_check = await asyncio.gather(_within(seconds, _redis_answer(seconds)),
                                                       _within(seconds, _database_answer()))
    return {"redis": redis_check, "database": database_check}


async def _within(seconds: float, answer) -> tuple:
    try:
        async with asyncio.timeout(seconds):
            await answer
    except TimeoutError:
        return f"no answer within {seconds:g} s", ""
    except Exception as exc:
        return f"failed ({type(exc).__name__})", str(exc).strip()
    return OK, ""


def _redis_answer(seconds: float):
    loop = asyncio.get_running_loop()
    ping = _pings.get(loop)
    if ping is None or ping.done():
        ping = _pings[loop] = loop.create_task(_ping(seconds))
    return asyncio.shield(ping)


async def _ping(seconds: float):
    # Bounded here too, so that the shared PING ends even when every probe waiting for it left.
    async with asyncio.timeout(seconds):
        await probe_redis(seconds).ping()


def _database_answer():
    global _database_check
    with _database_lock:
        if _database_check is None or _database_check.done():
            _database_check = _database_executor.submit(_select_one)
        check = _database_check
    return asyncio.shield(asyncio.wrap_future(check))


def _select_one():
    """``SELECT 1`` on each database the app writes to, in the probe's own thread: its
    connection follows CONN_MAX_AGE as a request's does, and one that failed is not reused."""
    from django.apps import apps
    from django.db import connections, router

    aliases = {router.db_for_write(model) for model in apps.get_app_config("mcp_transport").get_models()}
    try:
        for alias in sorted(aliases):
            connection = connections[alias]
            connection.close_if_unusable_or_obsolete()
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
                cursor.fetchone()
            connection.close_if_unusable_or_obsolete()
    except Exception:
        for alias in aliases:
            connections[alias].close()
        raise


class ProbesMiddleware:
    """First in MIDDLEWARE: answers ``/healthz`` and ``/readyz`` (where the app's URLs put them)
    before the middleware that checks the Host header or redirects to HTTPS sees the request.

        MIDDLEWARE = ["mcp_transport.probes.ProbesMiddleware", "django.middleware.security.SecurityMiddleware", ...]
    """

    sync_capable = async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)
        self.views = None

    def __call__(self, request):
        if self.views is None:
            self.views = _probe_paths()
        view = self.views.get(request.path)
        if view is None:
            return self.get_response(request)
        return view(request) if self.is_async else async_to_sync(view)(request)


def _probe_paths() -> dict:
    """{path: view} of the probes, as the project's URLconf includes ``mcp_transport.urls``."""
    from django.urls import NoReverseMatch, reverse

    paths = {}
    for name, view in (("healthz", healthz_view), ("readyz", readyz_view)):
        try:
            paths[reverse(f"mcp_transport:{name}")] = view
        except NoReverseMatch:
            log.warning("ProbesMiddleware: no /%s, as the URLconf does not include mcp_transport.urls", name)
    return paths
