"""Writing an SSE stream on one HTTP response: the frames a connection carries besides the
stream's events (priming, closing), keep-alive comments, polling mode, takeover.

The stream itself (its events, in the store and in recent frames) is running/streams.py's
``RequestStream``; this is the shell's side of it, the one piece that calls ASGI's ``send``.
"""
import asyncio
import secrets

from .. import auth
from ..conf import get_config
from ..protocol import sse
from ..running.streams import PING
from ..state import control

#: The headers of every SSE response (x-accel-buffering: nginx passes each event on at once).
SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"),
               (b"x-accel-buffering", b"no")]


def priming_frame(event_id) -> bytes:
    """"The server SHOULD immediately send an SSE event consisting of an event ID and an empty
    data field in order to prime the client to reconnect" -- spec 2025-11-25 basic/transports"""
    return sse.encode(sse.SseEvent(id=str(event_id), data="", retry=get_config()["SSE_RETRY_MS"]))


def closing_frame(retry_ms=None) -> bytes:
    """"If the server does close the connection prior to terminating the SSE stream, it SHOULD
    send an SSE event with a standard retry field before closing" -- spec 2025-11-25 transports"""
    retry = retry_ms if retry_ms is not None else get_config()["SSE_RETRY_MS"]
    return sse.retry_frame(retry) if retry is not None else b""


class SseWriter:
    """Sends queued frames on one HTTP response, with keep-alive comments when idle.

    It ends the response after a frame pushed with ``last=True``, when ``finish()`` is called
    (takeover, session closed), or, in polling mode, POLL_AFTER_SECONDS after it started. With
    AUTH on it also ends, with a retry field, when the token it was opened with expires or is
    revoked (``auth.watch_token``): the client's next request gets the 401, and once it has a
    new token it resumes with Last-Event-ID, missing nothing.

    One task per response, sleeping on a plain future between sends: thousands of streams are
    open at once, so a wake-up costs no extra task (``asyncio.wait_for`` makes one per wait on
    Python 3.11) and an idle stream holds one timer, re-armed once per keep-alive interval."""

    #: A process that stops ends it at once, with a retry (transports/draining.py), unless a call
    #: running here writes its stream: the client resumes it with Last-Event-ID elsewhere.
    ends_when_draining = True

    __slots__ = ("_send", "_frames", "_wakeup", "_timer", "_last_sent", "_sent_before_run", "session_id",
                 "stream_key", "token", "closed", "principal")

    def __init__(self, send, session_id: str, stream_key: str, principal):
        self._send = send
        self._frames = []
        self._wakeup = None
        self._timer = None
        self._last_sent = 0.0
        self._sent_before_run = False
        self.session_id, self.stream_key = session_id, stream_key
        #: Identifies this connection in takeover messages.
        self.token = secrets.token_hex(8)
        #: True once the last frame is queued: nothing more is accepted.
        self.closed = False
        #: Whose token opened the stream (auth.Principal), watched while the stream runs. Required:
        #: a writer made without it would outlive a revoked or expired token unnoticed.
        self.principal = principal

    def push(self, frame: bytes, last: bool = False) -> None:
        if not self.closed:
            self._frames.append(frame)
            self.closed = last
            wakeup = self._wakeup
            if wakeup is not None and not wakeup.done():
                wakeup.set_result(None)

    def queued_bytes(self) -> int:
        """Bytes queued and not sent yet (what a resume is about to replay)."""
        return sum(map(len, self._frames))

    def finish(self, frame: bytes = b"") -> None:
        self.push(frame, last=True)

    def finish_with_retry(self, retry_ms=None) -> None:
        """End the connection but not the stream: the client resumes after ``retry``."""
        self.finish(closing_frame(retry_ms))

    async def send_queued(self) -> None:
        """Send what is queued now, from the caller's task, before ``run`` starts."""
        if self._frames:
            frames, self._frames = self._frames, []
            self._sent_before_run = True
            await self._send({"type": "http.response.body", "body": b"".join(frames), "more_body": not self.closed})

    async def run(self) -> None:
        control.attach(self)
        stop_watching = auth.watch_token(self.principal, self.finish_with_retry)
        try:
            await self._write_until_last()
        finally:
            self.closed = True
            if self._timer is not None:
                self._timer.cancel()
            stop_watching()
            control.detach(self)

    async def _write_until_last(self):
        loop = asyncio.get_running_loop()
        config = get_config()
        poll_after = config["POLL_AFTER_SECONDS"]
        self._last_sent = loop.time()
        self._arm_keepalive(loop, config["KEEPALIVE_SECONDS"])
        deadline = loop.call_later(poll_after, self.finish_with_retry) if poll_after else None
        try:
            await self._send_until_last(loop, poll_after)
        finally:
            if deadline is not None:
                deadline.cancel()

    async def _send_until_last(self, loop, poll_after):
        if poll_after == 0 and self._sent_before_run:
            self.finish_with_retry()  # polling mode: what send_queued sent was all this connection carries
        while True:
            if self.closed and not self._frames:
                return  # send_queued sent the last frame
            if not self._frames:
                self._wakeup = loop.create_future()
                try:
                    await self._wakeup
                finally:
                    self._wakeup = None
            # Everything queued goes in one send: fewer writes when events come fast.
            frames, self._frames = self._frames, []
            last = self.closed
            await self._send({"type": "http.response.body", "body": b"".join(frames), "more_body": not last})
            self._last_sent = loop.time()
            if last:
                return
            if poll_after == 0 and not self._frames:
                self.finish_with_retry()  # polling mode: the priming event was all this connection carries

    def _arm_keepalive(self, loop, keepalive):
        at = self._last_sent + keepalive
        if at <= loop.time():  # frames are waiting for a send still under way: look again later
            at = loop.time() + keepalive
        self._timer = loop.call_at(at, self._on_keepalive_timer, loop, keepalive)

    def _on_keepalive_timer(self, loop, keepalive):
        if self.closed:
            return
        if loop.time() - self._last_sent >= keepalive * 0.99 and not self._frames:
            self.push(PING)
        self._arm_keepalive(loop, keepalive)
