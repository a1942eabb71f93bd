"""What every MCP endpoint over HTTP shares (/mcp, and HTTP+SSE's /sse and /messages): the
request's body as it arrives, the checks every request passes before its transport reads it
(Origin 403, Host 400, method 405, the bearer token 401/403), the JSON and error replies. Before
them all, a process that is stopping refuses the request (503: transports/draining.py)."""
import asyncio
import functools
import logging

import redis
from channels.consumer import AsyncConsumer
from channels.exceptions import StopConsumer
from channels.utils import await_many_dispatch
from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http.request import split_domain_port, validate_host

from .. import auth
from ..conf import get_config
from ..connections import redis_failure
from ..protocol import http, jsonrpc
from ..protocol.errors import ProtocolError, ServerStopping, TransportError
from ..running import drain

logger = logging.getLogger(__name__)

JSON_HEADERS = [(b"content-type", b"application/json")]


async def answer_failures(work, send_error, endpoint: str, log=logger) -> None:
    """Await ``work``; what it raises becomes the one error reply of every endpoint: a
    ProtocolError as itself, a Redis failure or a database outage as 503 (logged as what it is: connections.redis_failure), anything else as 500 (and a log record)."""
    try:
        await work
    except ProtocolError as exc:
        await send_error(exc)
    except redis.RedisError as exc:
        log.exception(redis_failure(exc))
        await send_error(ProtocolError("The session store is unavailable.", http_status=503))
    except (OperationalError, InterfaceError) as exc:
        # An outage, not a bug (bench/chaos.py's database cut: every initialize answered 500).
        log.error("the database is unreachable: %s", exc)
        await send_error(ProtocolError("The database is unreachable; try again shortly.", http_status=503))
    except Exception:
        log.exception("the %s endpoint failed", endpoint)
        await send_error(ProtocolError("Internal error.", http_status=500))


def _allowed_hosts():
    hosts = settings.ALLOWED_HOSTS
    if settings.DEBUG and not hosts:
        return [".localhost", "127.0.0.1", "[::1]"]  # as Django's HttpRequest.get_host()
    return hosts


def check_host(host):
    if not _host_allowed(host or "", tuple(_allowed_hosts())):
        raise TransportError(f"Host {host!r} is not allowed.")


@functools.lru_cache(maxsize=256)
def _host_allowed(host: str, allowed: tuple) -> bool:
    # Django's own checks, remembered per (Host, ALLOWED_HOSTS): a client sends the same Host on
    # every request, and splitting and matching it was 2 % of a busy process.
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, allowed)


class RequestBody:
    """A request's body as its ``http.request`` messages bring it. Past MAX_REQUEST_BYTES no
    more is kept: the request is refused with what came (``http.check_body_size``)."""

    def __init__(self):
        self.parts, self.size = [], 0

    def add(self, message) -> bool:
        """Keep this message's part; True once the body is complete, or too big to wait for."""
        part = message.get("body", b"")
        self.size += len(part)
        self.parts.append(part)
        return not message.get("more_body") or self.size > get_config()["MAX_REQUEST_BYTES"]

    def take(self) -> bytes:
        body, self.parts = b"".join(self.parts), []  # a held stream keeps no copy of its request
        return body


class HttpEndpoint(AsyncConsumer):
    """One HTTP request of an MCP endpoint, up to its transport's own handling.

    Channels' own message loop (``await_many_dispatch``) is kept on purpose: it awaits each
    message in a task, so a task a handler starts takes its first step before the next message
    (``http.disconnect``) is handled. A resumed GET's tail counts the resume in that step. A
    plain loop that awaited ``receive`` directly (tried for issue 19) lost that count when the
    client left at once, and a 2026-07-28 call left at once never reached its job's creation,
    which the test of a cancel during that creation needs: both failed under CI's load."""

    #: Tasks writing this request's response; the consumer lives until they are done.
    tasks = ()
    response_started = False
    #: The path of the protected resource a token must be issued for (None: the request's own).
    resource_path = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.body = RequestBody()

    async def __call__(self, scope, receive, send):
        # AsyncConsumer.__call__ with its channel layer left out: it looks the project's layer up
        # on every request (with none configured, through a caught exception: 5 % of a busy
        # daphne) and, with one, opens a channel per request. These consumers take no messages
        # but their own request's. The first is waiting already and nothing can come before it:
        # a JSON reply is sent without Channels' task and wait (three loop turns) per message;
        # every later message goes through Channels' loop, in the order described above.
        self.scope, self.base_send, self.channel_layer = scope, send, None
        if drain.active():  # the process is stopping: another one takes the request
            return await self.send_error(ServerStopping.refusal())
        try:
            await self.dispatch(await receive())
            await await_many_dispatch([receive], self.dispatch)
        except StopConsumer:
            pass

    async def dispatch(self, message):
        # AsyncConsumer.dispatch calls close_old_connections() through sync_to_async before
        # every message: a hop to Django's one sync thread per request. These consumers never use
        # the ORM on the event loop, and database_sync_to_async closes connections itself.
        await getattr(self, message["type"].replace(".", "_"))(message)

    async def send(self, message):
        self.response_started = True
        await super().send(message)

    def run_task(self, coroutine) -> asyncio.Task:
        task = asyncio.create_task(coroutine)
        self.tasks = (*self.tasks, task)
        return task

    def check_method(self, method: str) -> None:
        http.check_method(method)

    async def check_request(self) -> dict:
        """The request's headers (also ``self.headers``), once it passed the checks every MCP
        request passes, and the principal of its token: on every request, a resumed GET too.
        "MCP Servers MUST NOT use sessions for authentication" -- spec 2025-11-25
        basic/security_best_practices. The principal is at ``self.principal`` and
        ``scope["principal"]``, its Django user at ``scope["user"]``."""
        headers = self.headers = http.read_headers(self.scope["headers"])
        config = get_config()
        http.check_origin(headers.get("origin"), config["ALLOWED_ORIGINS"], config["ALLOW_LOOPBACK_ORIGINS"])
        check_host(headers.get("host"))
        self.check_method(self.scope["method"])
        self.principal = self.scope["principal"] = await auth.authenticate(self.scope, headers, self.resource_path,
                                                                        self.client_address)
        self.scope["user"] = self.principal.user
        return headers

    def client_address(self, headers=None) -> str:
        """The peer's address, or the client's as a trusted proxy forwarded it (TRUSTED_PROXIES)."""
        peer = self.scope.get("client") or (None,)
        forwarded = (headers or self.headers).get("x-forwarded-for")
        return http.client_address(peer[0], forwarded, get_config()["TRUSTED_PROXIES"])

    async def send_json(self, status, message, extra_headers=()):
        body = jsonrpc.dumps(message)
        headers = [*JSON_HEADERS, (b"content-length", str(len(body)).encode()), *extra_headers]
        await self.send({"type": "http.response.start", "status": status, "headers": headers})
        await self.send({"type": "http.response.body", "body": body})

    async def send_empty(self, status):
        await self.send({"type": "http.response.start", "status": status, "headers": [(b"content-length", b"0")]})
        await self.send({"type": "http.response.body", "body": b""})

    async def send_error(self, exc: ProtocolError):
        if self.response_started:
            # A streamed response failed after its headers went out: end it; the client resumes.
            for task in self.tasks:
                task.cancel()
            return await super().send({"type": "http.response.body", "body": b"", "more_body": False})
        status = exc.http_status if exc.http_status != 200 else 400
        await self.send_json(status, jsonrpc.error_message(None, exc.code, exc.message, exc.data), exc.asgi_headers())
