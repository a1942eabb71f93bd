"""One MCP session over a transport that carries messages, not HTTP requests: stdio, and the
2024-11-05 HTTP+SSE transport (``GET /sse`` + ``POST /messages``).

Theory of operation. The client's messages arrive one at a time (a line on stdin, the body of a
POST /messages); everything the server sends leaves on one connection (stdout, the GET /sse
stream). Each request runs on a stream of its own, exactly as a Streamable HTTP POST answered
with SSE: inline on this process (``streams.start``, with its heartbeat and orphan answer), or in
a Celery worker (``jobs.submit``): the request pipeline (running/pipeline.py) does both, through
this era's ``MessageResponder``. Nothing here runs an MCP method: ``dispatch`` does.

The session's *stream list* (a Redis list) names its streams in the order they were opened;
entry 0 is the session's GET stream, where the initialize reply, refusals and the server's own
notifications (``notify.py``, task status) go. A ``Follower`` reads, for one connection, every
listed stream that has not ended, and hands each message over with a ``Cursor`` (the SSE event
id): a client that reconnects with it as Last-Event-ID gets every message it missed, from
whichever process, and none twice.
"""
import asyncio
import contextlib
import logging

from django.contrib.auth.models import AnonymousUser

from .. import auth, logs
from ..state import sessions
from ..running import pipeline, streams
from ..eras.legacy_2025 import era
from ..eras.legacy_2025.era import receive_notification
from ..state.bell import doorbell
from ..conf import get_config
from ..connections import async_redis, keys, publish
from ..protocol import ids
from ..protocol.cursor import MAX_OPEN, START, Cursor
from ..protocol.errors import InvalidRequest
from ..protocol.ids import GET_STREAM, EventId
from ..protocol.jsonrpc import Notification, Request
from ..protocol.session import SessionState
from ..storage import UnknownEvent, get_event_store

logger = logging.getLogger(__name__)

def _list_ttl() -> int:
    """The stream list lives as long as the session and its streams can."""
    return max(sessions.side_key_ttl(), get_config()["STREAM_TTL"])


# -- the session and its streams ---------------------------------------------------------------

async def open_session(principal: auth.Principal, address: str = "") -> tuple:
    """A new session of ``principal``, not initialized yet, and the cursor of a connection that
    starts it. ``address``: the client's, for MAX_SESSIONS_PER_ADDRESS (429 above it)."""
    session = sessions.SessionRecord(id=ids.new_session_id(), protocol_version="", state=SessionState.NEW.value,
                                     user_id=principal.user_id, principal=principal.key, address=address,
                                     log_level=get_config()["DEFAULT_LOG_LEVEL"])
    await sessions.create(session)  # 429 past MAX_SESSIONS_PER_ADDRESS when it has an address
    name = keys().opened_streams(session.id)
    async with async_redis().pipeline(transaction=False) as pipe:
        pipe.rpush(name, GET_STREAM)
        pipe.expire(name, _list_ttl())
        await pipe.execute()
    # The GET stream's first event: what a cursor's position in it starts from.
    first = await get_event_store().append(session.id, GET_STREAM, None)
    return session, Cursor(session.id, 1, ((0, first.position),))


async def add_stream(session_id: str, stream_key: str) -> None:
    """List a request's stream and ring the GET stream's bell: followers take it in."""
    names = keys()
    async with async_redis().pipeline(transaction=False) as pipe:
        pipe.rpush(names.opened_streams(session_id), stream_key)
        pipe.expire(names.opened_streams(session_id), _list_ttl())
        publish(pipe, names.stream_bell(session_id, GET_STREAM), "opened")
        await pipe.execute()


async def reply(session_id: str, message: dict) -> None:
    """A message answered on the spot (initialize, a refused request): on the GET stream."""
    await get_event_store().append(session_id, GET_STREAM, message)


# -- what the client sends ----------------------------------------------------------------------

async def receive(session, message, principal: auth.Principal, scope=None, headers=None) -> None:
    """Act on one message of the client. Returns once a request has started, not finished.

    ``scope`` and ``headers``: the HTTP request that carried it, whose principal must have the
    scopes the tool, resource or prompt requires (else InsufficientScope, 403, raised here)."""
    if isinstance(message, Request):
        await _receive_request(session, message, principal, scope, headers)
    elif isinstance(message, Notification):
        await receive_notification(session, message)
    else:
        await streams.deliver_reply(session.id, {"id": message.id, "result": message.result, "error": message.error})


async def _receive_request(session, request, principal, scope, headers):
    logs.bind_request(request.id)
    call = pipeline.begin(request, session, headers, "http" if scope is not None else "pipe", principal=principal,
                          user=principal.user or AnonymousUser(), address=session.address)
    answer = await pipeline.serve(request, call, MessageResponder(session), scope=scope, headers=headers)
    if answer is not None:
        await reply(session.id, answer.message)


class MessageResponder(era.LegacyResponder):
    """The pipeline's side of a transport that carries messages (stdio, HTTP+SSE): every
    message reaches the client through the session's follower, from the streams it lists."""

    #: The revision that defined HTTP+SSE too: its clients speak no later one.
    versions = era.MESSAGE_VERSIONS

    async def keep_session(self) -> None:
        session = self.session
        await sessions.update(session, state=session.state, protocol_version=session.protocol_version,
                              client_info=session.client_info, client_capabilities=session.client_capabilities)

    def wants_stream(self, may_send: bool, blocks: bool = False) -> bool:
        # Each request on a stream of its own, so the follower hands over its messages in order;
        # the initialize of a session not yet open (the only request it takes) is one message.
        return self.session.state != SessionState.NEW.value

    async def open_stream(self, request, call):
        return await streams.open_request_stream(self.session.id, request.id, self._list)

    async def _list(self, stream) -> None:
        await add_stream(self.session.id, stream.stream_key)

    async def open_job_stream(self, stream_key):
        await add_stream(self.session.id, stream_key)  # listed: followers wait for its answer
        return None


# -- what the server sends ----------------------------------------------------------------------

class Follower:
    """Reads a session's open streams for one connection, handing over each message with the
    cursor after it: ``deliver(message, event_id)``, a plain function that queues it.

    It stops when ``is_open()`` turns false, when the session ends (closed or expired), or when
    cancelled. While it runs, the session does not expire: each quiet round refreshes it.

    Whenever the doorbells stay silent it reads every open stream anyway (a lost doorbell
    delays a message, never loses it) and answers the requests whose process or worker died
    (``streams.answer_orphan``), as a resumed Streamable HTTP stream does: the follow loop
    every follower shares, ``streams.rounds``."""

    def __init__(self, cursor: Cursor, deliver, is_open=lambda: True):
        self.session_id, self.known = cursor.session_id, cursor.known
        #: entry -> position read, for the streams taken in that have not ended.
        self.positions = dict(cursor.open)
        #: entry -> stream key, for the same streams.
        self.stream_keys = {}
        self.deliver, self.is_open = deliver, is_open
        self.subscription = doorbell().listen()
        self._entries_by_bell = {}
        #: True while streams wait to be taken in because the cursor is full.
        self._full = False
        #: Set by ``drain()``: stop once every request taken in so far has been answered.
        self._draining = False

    @property
    def cursor(self) -> Cursor:
        return Cursor(self.session_id, self.known, tuple(sorted(self.positions.items())))

    async def start(self, resumed=False) -> None:
        """Subscribe and read what is there (queued through ``deliver``). For a resumed cursor
        this is where a replay that cannot be whole fails, with InvalidRequest."""
        listed = await async_redis().lrange(keys().opened_streams(self.session_id), 0, max(self.known - 1, 0))
        if len(listed) < self.known or 0 not in self.positions:
            raise InvalidRequest("Last-Event-ID names streams this session no longer has.")
        self.stream_keys = {entry: listed[entry] for entry in self.positions}
        try:
            await self._listen(list(self.positions))
            for entry in list(self.positions):
                await self._read(entry, strict=resumed)
            await self._take_in()
        except BaseException:
            await self.subscription.__aexit__(None, None, None)
            raise

    async def run(self) -> None:
        """Follow the streams until the connection or the session ends (after ``start``)."""
        try:
            await self._follow()
        finally:
            await self.subscription.__aexit__(None, None, None)

    async def drain(self) -> None:
        """End ``run()`` once every listed request has ended (its answer handed over): the
        client will send no more (stdio's stdin closed)."""
        self._draining = True
        await publish(async_redis(), keys().stream_bell(self.session_id, GET_STREAM), "drain")

    async def _idle(self) -> bool:
        return len(self.positions) == 1 and await async_redis().llen(keys().opened_streams(self.session_id)) <= self.known

    async def _listen(self, entries):
        channels = []
        for entry in entries:
            channel = keys().stream_bell(self.session_id, self.stream_keys[entry])
            self._entries_by_bell[channel] = entry
            channels.append(channel)
        await asyncio.wait_for(await self.subscription.add(*channels), 5)

    async def _take_in(self):
        """Start reading the streams opened since (as many as a cursor can hold)."""
        room = MAX_OPEN - len(self.positions)
        self._full = room <= 0
        if self._full:
            return
        opened = await async_redis().lrange(keys().opened_streams(self.session_id), self.known,
                                            self.known + room - 1)
        entries = list(range(self.known, self.known + len(opened)))
        for entry, stream_key in zip(entries, opened):
            self.stream_keys[entry], self.positions[entry] = stream_key, START
        self.known += len(opened)
        if entries:
            await self._listen(entries)  # subscribed before the read: nothing falls in between
            for entry in entries:
                await self._read(entry)

    async def _read(self, entry, strict=False):
        store, stream_key, position = get_event_store(), self.stream_keys[entry], self.positions[entry]
        if strict and position != START:
            try:
                events = await store.replay_after(self.session_id, EventId(stream_key, position))
            except UnknownEvent:
                raise InvalidRequest("Last-Event-ID names an event this session no longer keeps.") from None
        else:
            events = await store.read_after(self.session_id, stream_key, position)
        for event in events:
            self.positions[entry] = event.id.position
            ended = event.final and entry != 0
            if ended:
                del self.positions[entry]  # the cursor sent with the response no longer holds it
            if event.message is not None:
                self.deliver(event.message, str(self.cursor))
            if ended:
                await self._ended(entry)
                return

    async def _ended(self, entry):
        stream_key = self.stream_keys.pop(entry)
        channel = keys().stream_bell(self.session_id, stream_key)
        self._entries_by_bell.pop(channel, None)
        await self.subscription.remove(channel)

    async def _follow(self):
        """Each of the follow loop's rounds (``start`` read what was there): the streams whose
        bells rang, or every one and the new ones after a quiet round."""
        config = get_config()
        quiet = min(config["KEEPALIVE_SECONDS"], config["HEARTBEAT_SECONDS"])
        rounds = streams.rounds(self.subscription, quiet, self._on_quiet, first=False, going=self.is_open)
        async with contextlib.aclosing(rounds):
            async for rung in rounds:
                if rung is None:
                    entries, take_in = list(self.positions), True
                else:
                    entries = await self._rung(rung)
                    take_in = 0 in entries
                for entry in entries:
                    if entry in self.positions:
                        await self._read(entry)
                if take_in or (self._full and len(self.positions) < MAX_OPEN):
                    await self._take_in()
                if self._draining and await self._idle():
                    # The drain may have begun after this round's reads: what was answered on the
                    # GET stream before it (a refusal of stdin's last line) is read once more.
                    await self._read(0)
                    return

    async def _rung(self, first):
        """The entries whose bells rang: this one and any already queued."""
        entries, rung = set(), first
        while rung is not None:
            if rung[0] is None:  # subscribed again after a reconnect: any stream may have grown
                entries.update(self.positions)
            entry = self._entries_by_bell.get(rung[0])
            if entry is not None:
                entries.add(entry)
            rung = await self.subscription.wait(0)
        return sorted(entries)

    async def _on_quiet(self) -> bool:
        """Housekeeping when nothing rang; False when the session has ended."""
        if await sessions.load(self.session_id) is None:
            return False
        await async_redis().expire(keys().opened_streams(self.session_id), _list_ttl())
        for entry, stream_key in list(self.stream_keys.items()):
            if entry != 0:
                await streams.answer_orphan(self.session_id, stream_key)
        return True
