"""A POST on /mcp (``PostHandling``: the consumer hands it its POST requests), checked, then
handed to its era as a ``PostExchange``: a 2026-07-28 request to ``modern_post.py``; an
``initialize`` or a session's request to ``legacy_post.py``; a notification or a response to the
server's request is taken in here."""
from . import legacy_post, modern_post
from .post_exchange import PostExchange
from ..running import streams
from ..running.routes import Route
from ..conf import get_config, message_bounds
from ..auth.callers import Caller
from ..protocol import http, jsonrpc
from ..protocol.modern import is_modern
from ..protocol.jsonrpc import Notification, Request
from ..eras.legacy_2025 import era as era_2025
from ..eras.legacy_2025.era import receive_notification


class PostHandling:
    """A POST on /mcp, for the consumer that received it: its checks, then its era's way
    (a 2026-07-28 request, an ``initialize``, or a message of a 2025-11-25 session), each given
    a ``PostExchange``."""

    __slots__ = ("consumer",)

    def __init__(self, consumer):
        self.consumer = consumer

    async def post(self, body):
        consumer = self.consumer
        http.check_content_type(consumer.headers.get("content-type"))
        accept = http.negotiate_post(consumer.headers.get("accept"))
        http.check_body_size(consumer.body.size, get_config()["MAX_REQUEST_BYTES"])
        message = jsonrpc.parse(body, message_bounds())
        if is_modern(message, consumer.headers):  # spec-checklist §3.2, step 4
            return await modern_post.post(PostExchange(consumer, accept), message)
        if "mcp-session-id" not in consumer.headers and isinstance(message, Request) \
                and message.method == "initialize":
            return await legacy_post.initialize(PostExchange(consumer, accept), message)
        is_request = isinstance(message, Request)
        route = caller = rate = None
        if is_request:
            # Its route and caller, made once: a rate limited call's place in its caller's
            # window is taken by the session's read.
            route = Route.of(message, era_2025.RULES.methods)
            caller = Caller.of(consumer.principal, consumer.client_address)
            rate = route.rate_charge(caller) if route.counts_as_call else None
        initialized = isinstance(message, Notification) and message.method == "notifications/initialized"
        session = await consumer.open_session(for_call=route is not None and route.counts_as_call, rate=rate,
                                              initialized=initialized)
        exchange = PostExchange(consumer, accept)  # with the session's running calls its read counted
        if is_request:
            await legacy_post.post_request(exchange, session, message, route, caller, rate)
        elif isinstance(message, Notification):
            await receive_notification(session, message)
            await exchange.send_accepted()
        else:
            await streams.deliver_reply(session.id, {"id": message.id, "result": message.result,
                                                     "error": message.error})
            await exchange.send_accepted()
