"""How to add a transport: a whole one in a few dozen lines, over the request pipeline
(running/pipeline.py). It carries messages in memory, so what it "sends" is a list; everything
else (checks, admission, inline / streamed / background runs, release, the calls-log record) is
the pipeline's, and what the answers look like is the era's (``LegacyResponder`` for
2025-11-25 sessions, ``ModernResponder`` for 2026-07-28 requests).

Run as a program (tests/integration/test_fake_transport.py does, next to a Celery worker, with
the servers' environment), it serves a few requests in each era and prints, per request, the
messages it sent as one JSON line.
"""
import asyncio
import json
import sys


class FakeTransport:
    """The transport's half of a responder: where messages go. Mixed into an era's responder."""

    def __init__(self, sent: list):
        self.sent = sent

    def wants_stream(self, may_send: bool, blocks: bool = False) -> bool:
        return may_send

    async def open_stream(self, request, call):
        return FakeStream(self.sent, request.id)

    async def open_job_stream(self, stream_key):
        """A 2025-11-25 background job writes its own stream in the event store: follow it."""
        from mcp_transport.protocol.cursor import START
        from mcp_transport.storage import get_event_store

        async def follow(position=START):
            while True:
                for event in await get_event_store().read_after(self.session.id, stream_key, position):
                    position = event.id.position
                    if event.message is not None:
                        self.sent.append(event.message)
                    if event.final:
                        return
                await asyncio.sleep(0.05)
        return follow


class FakeStream:
    """A streamed call (pipeline.CallStream): its messages, then its answer, on the list. It is
    also the channel the call's Context talks to (this transport cannot ask the client)."""

    cancelled = False

    def __init__(self, sent: list, request_id):
        self.sent, self.request_id = sent, request_id

    @property
    def channel(self):
        return self

    async def notify(self, method, params):
        self.sent.append({"jsonrpc": "2.0", "method": method, "params": params})

    async def request(self, method, params, **_options):
        from mcp_transport.methods.context import ClientCapabilityError

        raise ClientCapabilityError(f"Cannot send {method}: this transport cannot ask the client.")

    async def close_stream(self, retry_ms=None):
        return None

    def start(self, work):
        return asyncio.get_running_loop().create_task(work)

    def answers_cancel(self):
        return False

    async def claim(self):
        return True

    async def finish(self, message, error=None):
        self.sent.append(message)


async def serve(era: str, request_id, method: str, params: dict) -> list:
    """The messages one request gets through the fake transport, in ``era``."""
    from mcp_transport.auth import Principal
    from mcp_transport.eras.legacy_2025.era import LegacyResponder
    from mcp_transport.eras.modern_2026.era import ModernResponder, stateless_session
    from mcp_transport.protocol.ids import new_session_id
    from mcp_transport.protocol.jsonrpc import Request
    from mcp_transport.running import pipeline
    from mcp_transport.state import sessions

    sent, request, principal = [], Request(id=request_id, method=method, params=params), Principal()
    if era == "2025-11-25":
        session = sessions.SessionRecord(id=new_session_id(), protocol_version=era, state="ready",
                                         client_info={}, client_capabilities={}, log_level="debug")
        await sessions.create(session)

        class Responder(FakeTransport, LegacyResponder):
            def __init__(self):
                LegacyResponder.__init__(self, session)
                FakeTransport.__init__(self, sent)
        responder = Responder()
    else:
        session = stateless_session(params.get("_meta"), None)

        class Responder(FakeTransport, ModernResponder):
            def __init__(self):
                ModernResponder.__init__(self, request, self, modern_headers(request), 0)
                FakeTransport.__init__(self, sent)

            async def send(self, message):  # the reply a 2026-07-28 channel sends on
                self.sent.append(message)
        responder = Responder()
    call = pipeline.begin(request, session, transport="fake", principal=principal, address="fake")
    answer = await pipeline.serve(request, call, responder)
    if answer is not None:  # a one-message answer, for the transport to write
        sent.append(answer.message)
    while not sent or "id" not in sent[-1] or "method" in sent[-1]:  # a streamed call answers in its task
        await asyncio.sleep(0.02)
    return sent


def modern_headers(request) -> dict:
    """What a 2026-07-28 client sends with a request: the version, the method, its target."""
    headers = {"mcp-protocol-version": "2026-07-28", "mcp-method": request.method}
    if "name" in request.params:
        headers["mcp-name"] = request.params["name"]
    return headers


async def main(era: str, requests: list) -> None:
    for request_id, (method, params) in enumerate(requests, 1):
        print(json.dumps(await serve(era, request_id, method, params)), flush=True)


if __name__ == "__main__":
    import django

    django.setup()
    asyncio.run(main(sys.argv[1], json.loads(sys.stdin.read())))
