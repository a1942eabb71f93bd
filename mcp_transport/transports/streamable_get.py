"""A GET on /mcp (``StreamGet``: the consumer hands it its GET requests): the session's
standalone stream, or a stream resumed from its Last-Event-ID (from this process's memory when
it still writes it, else replayed from the event store and followed by a ``StreamTail``)."""
import asyncio
import logging
from contextlib import aclosing

import redis

from ..state import control, metrics, quotas, sessions
from ..running import streams
from ..state.bell import doorbell
from ..conf import get_config
from ..connections import keys
from ..protocol import http, ids
from ..protocol.errors import InvalidRequest, TransportError
from ..storage import UnknownEvent, get_event_store
from .sse_writer import SseWriter

logger = logging.getLogger(__name__)


class StreamGet:
    """A GET on /mcp, for the consumer that received it (its headers, session, response)."""

    __slots__ = ("consumer", "session")

    def __init__(self, consumer):
        self.consumer, self.session = consumer, None

    async def get(self):
        http.check_get_accept(self.consumer.headers.get("accept"))
        last_event_id = self.consumer.headers.get("last-event-id")
        event_id = ids.EventId.parse(last_event_id) if last_event_id else None
        stream_key = event_id.stream if event_id else ids.GET_STREAM
        metrics.incr("get_requests")
        if event_id is not None and await self.resume_local(event_id):
            return
        subscription, confirmed, backlog = await self.open_listen_and_replay(stream_key, event_id)
        session = self.session
        claim = control.ReaderClaim(session.id, stream_key)
        # "The server MUST send each of its JSON-RPC messages on only one of the connected
        # streams": a second plain GET gets 409. A resume takes the stream over instead (in the
        # tail, after the headers): the old connection may be a dead one after a network switch.
        if event_id is None and not await claim.acquire():
            await _release(subscription, None)
            raise TransportError("This session already has an open GET stream.", http_status=409)
        writer = SseWriter(self.consumer.send, session.id, stream_key, self.consumer.principal)
        position = event_id.position if event_id else await self.consumer.prime(writer, session, stream_key)
        tail = StreamTail(writer, session.id, position, subscription, claim, take_over=event_id is not None)
        finished = tail.write(backlog)
        if event_id is not None:
            try:  # 429 before the headers: the replay is queued, not sent
                await self.charge_replay(writer.queued_bytes())
            except BaseException:
                await _release(subscription, None)
                raise
            if not finished and not backlog:
                writer.push(streams.RESUMED)
        self.consumer.tail = tail
        await self.consumer.start_sse(session.id, stream_key, claim.token, run=False, writer=writer)
        # The replay goes out with the headers from this task: its first event does not wait
        # for the writer's task to be scheduled.
        await writer.send_queued()
        self.consumer.run_task(writer.run())
        self.consumer.run_task(self.consumer.tail.run(confirmed, finished))

    async def resume_local(self, event_id) -> bool:
        """Resume a stream that a request running in this process still writes: its recent
        frames go out with the headers and its next ones straight to this connection, with no
        Redis round trip before the first event. False when this process cannot (another one
        runs the request, or the client is further behind than the frames it keeps)."""
        stream = streams.local_streams.get((self.consumer.headers.get("mcp-session-id"), event_id.stream))
        if stream is None:
            return False
        session = await self.consumer.open_session(resume=True)
        claim = control.ReaderClaim(session.id, event_id.stream)
        writer = SseWriter(self.consumer.send, session.id, event_id.stream, self.consumer.principal)
        writer.token = claim.token
        size = stream.replay_size(event_id.position)
        if size is None:
            return False
        await self.charge_replay(size)
        replayed = stream.resume(event_id.position, writer)
        if replayed is None:
            return False
        await self.consumer.start_sse(session.id, event_id.stream, claim.token, run=False, writer=writer)
        await writer.send_queued()
        metrics.incr_session(session.id, "resumes")
        metrics.incr_session(session.id, "replays")
        metrics.incr_session(session.id, "replayed_events", replayed)
        metrics.incr("replay_hits:memory")
        self.consumer.run_task(self.hold_local(writer, claim))
        return True

    async def charge_replay(self, size: int):
        """REPLAY_BYTES_PER_CALLER: 429 with Retry-After once this caller's replays are spent."""
        await quotas.charge_replay(self.consumer.principal.key, self.consumer.client_address(), size)

    async def hold_local(self, writer, claim):
        """Run a locally resumed stream's writer; other processes' readers of it stop first."""
        metrics.incr("get_resumes")
        await claim.take_over()
        try:
            await writer.run()
        finally:
            await claim.release()

    async def open_listen_and_replay(self, stream_key, event_id):
        """Load the session, subscribe to the stream's doorbell and replay, all at once (one
        round trip of latency). The replay is only sent if the session checks out. It does not
        wait for Redis to confirm the subscription: the tail reads the store once more when it
        is confirmed, so an event appended in between is neither lost nor sent twice."""
        session_id = self.consumer.headers.get("mcp-session-id") or ""
        subscription = doorbell().listen(keys().stream_bell(session_id, stream_key))
        opened, confirmed, _, backlog = await asyncio.gather(
            self.consumer.open_session(resume=event_id is not None), subscription.open(), control.ensure_listening(),
            self.replay(session_id, event_id), return_exceptions=True)
        for outcome in (opened, confirmed, backlog):  # in this order: 400/404 for the session first
            if isinstance(outcome, BaseException):
                await subscription.__aexit__(None, None, None)
                if outcome is backlog and isinstance(outcome, InvalidRequest):
                    metrics.incr_session(opened.id, "resumes")
                    metrics.incr_session(opened.id, "replay_failures")
                raise outcome
        self.session = opened
        sessions.used(opened)  # a session that listens did something: the admin lists it
        if event_id is not None:
            metrics.incr_session(opened.id, "resumes")
            metrics.incr_session(opened.id, "replays")
            metrics.incr_session(opened.id, "replayed_events", len(backlog))
        return subscription, confirmed, backlog

    async def replay(self, session_id, event_id):
        if event_id is None:
            return []
        try:
            # The store counts replay_hits:<source> and replay_failures:<reason> itself.
            return await get_event_store().replay_after(session_id, event_id)
        except UnknownEvent:
            # Not 404: "When a client receives HTTP 404 ... it MUST start a new session."
            raise InvalidRequest("Last-Event-ID names no event this session can replay: "
                                 "it is unknown or no longer kept.") from None


async def _release(subscription, claim):
    await subscription.__aexit__(None, None, None)
    if claim is not None:
        await claim.release()


class StreamTail:
    """Writes a GET response: the replayed backlog, then live events until the stream's final
    event (a resumed POST stream), a takeover, the session's end, or the client's disconnect.

    Whenever the doorbell stays silent, it keeps its claim on the stream alive, reads the store
    anyway (a lost doorbell delays an event, never loses it) and checks that the request behind
    a POST stream still has a live process (else it answers it with an error)."""

    __slots__ = ("writer", "session_id", "stream_key", "position", "subscription", "claim", "take_over")

    def __init__(self, writer, session_id, position, subscription, claim, take_over=False):
        self.writer, self.session_id, self.stream_key = writer, session_id, writer.stream_key
        self.position, self.subscription, self.claim = position, subscription, claim
        self.take_over = take_over

    async def run(self, confirmed, finished=False):
        """Follow the stream once the caller has queued its replay (``finished``: it ended it).

        A follower that loses its source (Redis gone for longer than REDIS_OUTAGE_TOLERANCE,
        the database with it) ends the connection with a ``retry``, not the stream: the client
        resumes from its last event, here or on another process. Left running, its writer would
        send keep-alives for ever on a stream that no longer moves."""
        try:
            if self.take_over:  # the backlog is on its way; now stop whoever else reads this stream
                metrics.incr("get_resumes")
                await self.claim.take_over()
            if finished:
                return
            await self.wait_confirmed(confirmed)
            await self.follow()
        except Exception:
            logger.warning("following stream %s failed; the client resumes it after a retry", self.stream_key,
                           exc_info=True)
            metrics.incr("followers_lost")
            self.writer.finish_with_retry()
        finally:
            await self.release()

    @staticmethod
    async def wait_confirmed(confirmed):
        """Until Redis confirmed the doorbell's subscription; a confirmation that is late (a
        stall) only delays the events the quiet reads find anyway (``follow``)."""
        try:
            await asyncio.wait_for(asyncio.shield(confirmed), 5)
        except TimeoutError:
            logger.info("the doorbell's subscription is not confirmed yet; following by reads")

    async def release(self):
        """Give up the doorbell and the claim on the stream; safe to call twice. A claim Redis
        cannot release now lapses on its own (its ttl)."""
        subscription, self.subscription = self.subscription, None
        if subscription is not None:
            try:
                await _release(subscription, self.claim)
            except redis.RedisError:
                logger.info("releasing the claim on stream %s failed; it lapses", self.stream_key)

    def write(self, events) -> bool:
        """Queue events; True once the final one is queued (the response is then complete)."""
        for event in events:
            self.position = event.id.position
            if event.final:
                self.writer.finish(streams.event_frame(event.id, event.message) if event.message else b"")
                return True
            if event.message is not None:
                self.writer.push(streams.event_frame(event.id, event.message))
        return False

    async def follow(self):
        events = streams.tail(self.session_id, self.stream_key, self.position, self.subscription,
                              self.quiet_interval(), self.on_quiet)
        async with aclosing(events):
            async for event in events:
                if self.write((event,)):
                    return

    def quiet_interval(self):
        config = get_config()
        if self.stream_key == ids.GET_STREAM:
            return config["KEEPALIVE_SECONDS"]
        return min(config["KEEPALIVE_SECONDS"], config["HEARTBEAT_SECONDS"])

    async def on_quiet(self) -> bool:
        """Housekeeping when nothing rang; False when this connection must end."""
        if self.writer.closed:
            return False
        if not await self.claim.extend():
            self.writer.finish_with_retry()  # taken over by a newer resume
            return False
        if self.stream_key != ids.GET_STREAM:
            await streams.answer_orphan(self.session_id, self.stream_key)
        return True
