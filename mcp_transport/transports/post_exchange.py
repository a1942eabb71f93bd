"""A POST on /mcp as the layers below the shell see it, in either era: what the request says and
the consumer's ways to answer it, bound once (no layer below the shell holds the consumer)."""
from ..running import pipeline


class PostExchange:
    """A POST as the layers below the shell see it, in either era (``modern_post.Exchange`` for
    2026-07-28, ``legacy_post.LegacyPostResponder``'s for 2025-11-25): what the request says, and the consumer's
    ways to answer it, bound once (no layer below this one holds the consumer)."""

    __slots__ = ("headers", "scope", "principal", "user", "user_id", "body_size", "accept", "client_address",
                 "running_calls", "send", "send_json", "send_accepted", "run_task", "start_sse", "prime",
                 "follow_tail")

    def __init__(self, consumer, accept):
        self.headers, self.scope, self.principal = consumer.headers, consumer.scope, consumer.principal
        self.user = user = consumer.user
        self.user_id = user.pk if user.is_authenticated else None
        self.body_size, self.accept = consumer.body.size, accept
        #: The session's running background calls, as its read counted them (None before one).
        self.running_calls = consumer.running_calls
        self.client_address, self.run_task = consumer.client_address, consumer.run_task
        self.send, self.send_json, self.send_accepted = consumer.send, consumer.send_json, consumer.send_accepted
        self.start_sse, self.prime, self.follow_tail = consumer.start_sse, consumer.prime, consumer.follow_tail

    async def send_answer(self, answer: pipeline.Answer, extra_headers=()) -> None:
        """A call's one answer as one JSON message, with the status and headers of its error."""
        error = answer.error
        await self.send_json(error.http_status if error else 200, answer.message,
                             [*extra_headers, *error.asgi_headers()] if error else extra_headers)

    def wants_sse(self, may_send=False) -> bool:
        """SSE when the client accepts it and the handler may send before its result, or the
        client ranks SSE first or accepts nothing else."""
        accept = self.accept
        return accept.sse and (may_send or accept.prefers_sse or not accept.json)
