"""SSE streams of a session: running a request that answers over SSE, its frames, and the
cross-process paths into a running request (client replies, cancellation). The connection a
stream is written to is the shell's (transports/sse_writer.py): here it is any ``writer`` with
``push``, ``finish_with_retry`` and ``closed``.

Theory of operation. A POST answered with SSE gets a stream key. Every message of that
request (progress, logs, server-to-client requests, the response) is appended to the event
store first, then pushed to the connection if it is still attached. The request runs in its
own task, so a dropped connection does not stop it: "Disconnection SHOULD NOT be interpreted
as the client cancelling its request." -- spec 2025-11-25 basic/transports. A client that lost
the connection resumes with GET + Last-Event-ID on any process, which replays from the store
and follows the stream's doorbell until the response.
"""
import asyncio
import collections
import contextlib
import json
import logging

from ..state import control, metrics, quotas, sessions
from ..state.bell import doorbell
from ..conf import get_config
from ..logs import client_value
from ..connections import async_redis, keys
from ..methods.context import ClientCapabilityError, ClientRequestError, ToolCancelled
from ..protocol import ids, sse
from ..protocol.errors import ErrorCode
from ..protocol.jsonrpc import dumps, error_message, notification_message, request_message
from ..storage import get_event_store
from . import replies

logger = logging.getLogger(__name__)

PING = sse.comment("ping")
#: A resume's first chunk when it has nothing to replay yet: the first body chunk is what makes
#: daphne send the response headers.
RESUMED = sse.comment("resumed")
#: Strong references to request tasks, so a dropped connection cannot let them be collected.
_tasks = set()


def event_frame(event_id, message) -> bytes:
    return message_frame(event_id, dumps(message))


def message_frame(event_id, data: bytes) -> bytes:
    return sse.message_frame(data, event_id)


#: Streams of the requests this process runs, by (session id, stream key): a resume that reaches
#: this process is served from their recent frames (``RequestStream.resume``).
local_streams = {}


class RequestStream:
    """One request answered over SSE: its stream in the store and, while attached, its connection.

    It is also the ``channel`` a tool's Context talks to. It keeps its last ``RECENT_FRAMES``
    frames, so that a client that dropped its connection and comes back to this process gets
    them with no round trip to Redis."""

    RECENT_FRAMES = 32
    #: Notifications that may be on their way to the store while the tool goes on (``notify``);
    #: 0: each one waits until its event is stored.
    NOTIFY_AHEAD = 16

    def __init__(self, session_id: str, request_id, stream_key: str):
        self.session_id = session_id
        self.request_id = request_id
        self.stream_key = stream_key
        self._cancelled = False
        #: Its session closed while it ran: (why, by whom) as the ``closed`` message said (control.py).
        self.closed_by = None
        #: Subscriptions of this request's questions to the client that wait for an answer.
        self._asking = set()
        #: monotonic time of the last heartbeat written for this request (control.py).
        self.last_beat = 0.0
        self._writer = None
        #: Its messages go to a connection of its own (Streamable HTTP), so none attached means
        #: nobody reads them; stdio and HTTP+SSE sessions read every stream through one follower.
        self.own_connection = False
        #: (position, frame, final) of the stream's last events; the priming event's frame is None.
        self._recent = collections.deque(maxlen=self.RECENT_FRAMES)
        #: The tasks storing notifications the tool has gone on from, oldest first (``notify``),
        #: and the first error one of them met.
        self._notifying = collections.deque()
        self._notify_failure = None
        #: Its entry in control.running while its work runs here (``start``).
        self._running_key = None

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    @cancelled.setter
    def cancelled(self, value: bool) -> None:
        """A cancel (or the session's DELETE) also ends the waits for the client's answers: a
        sync tool's thread waiting there is freed now, not at CLIENT_REQUEST_TIMEOUT."""
        self._cancelled = value
        if value:
            for subscription in self._asking:
                subscription.wake()

    def attach(self, writer) -> None:
        self._writer = writer
        self.own_connection = True

    def primed(self, position: str) -> None:
        """The stream's first event (sent by whoever opened it): a resume may start from it."""
        self._recent.append((position, None, False))

    async def emit(self, message, final: bool = False):
        """Store ``message`` as the stream's next event and send it, after every notification
        the tool sent before it (``notify``). The stream's final event is stored even when one
        of them failed: the request still gets its one answer."""
        await self.settle(raise_failure=not final)
        fitted, data = _fitted(message)
        if fitted is None and message is not None:
            return None  # an oversized notification or request: dropped (counted)
        return await self._store_and_send(fitted, data, final)

    async def _store_and_send(self, message, data, final=False):
        event_id = await get_event_store().append(self.session_id, self.stream_key, message, final=final, data=data)
        frame = message_frame(event_id, data) if data else b""
        self._recent.append((event_id.position, frame, final))
        writer = self._writer
        if writer is not None and not writer.closed:
            writer.push(frame, last=final)
        return event_id

    def replay_size(self, position: str):
        """Bytes of the recent frames after ``position``, or None when they do not reach back to it."""
        recent = list(self._recent)
        index = next((i for i, (known, _, _) in enumerate(recent) if known == position), None)
        return None if index is None else sum(len(frame) for _, frame, _ in recent[index + 1:])

    def resume(self, position: str, writer):
        """Queue the frames after ``position`` on ``writer`` and attach it, in one step (no event
        can fall between them); how many it queued, or None, attaching nothing, when the recent
        frames do not reach back to ``position``."""
        recent = list(self._recent)
        index = next((i for i, (known, _, _) in enumerate(recent) if known == position), None)
        if index is None:
            return None
        after = recent[index + 1:]
        for _, frame, final in after:
            writer.push(frame, last=final)
        if not after:
            writer.push(RESUMED)
        previous, self._writer = self._writer, writer
        if previous is not None and previous is not writer:
            previous.finish_with_retry()  # "the newest resume wins" (README: one reader per stream)
        return len(after)

    async def notify(self, method: str, params: dict) -> None:
        """Send a notification without waiting for the store: a tool reporting progress every
        100 ms would otherwise report every 100 ms plus a round trip to Redis, and more as the
        appends of many streams queue (issue 19: a 403 ms gap between events made every 100 ms
        under 1,000 streams). It is stored and sent in order all the same: the store takes
        appends in the order they are submitted, its tasks start in the order they are made,
        and whatever the stream sends next (``emit``: the result, a question) waits for them.
        At most NOTIFY_AHEAD are on their way; a failure of one is raised to the tool by the
        next notification or the result."""
        message = notification_message(method, params)
        if not self.NOTIFY_AHEAD:
            await self.emit(message)
            return
        fitted, data = _fitted(message)  # a message that cannot be encoded fails here, in the tool
        if fitted is None:
            return
        while len(self._notifying) >= self.NOTIFY_AHEAD:
            await asyncio.wait([self._notifying[0]])
        self._raise_failure()
        task = asyncio.ensure_future(self._store_and_send(fitted, data))
        self._notifying.append(task)
        task.add_done_callback(self._notified)

    def _notified(self, task):
        self._notifying.remove(task)
        if not task.cancelled() and task.exception() is not None and self._notify_failure is None:
            self._notify_failure = task.exception()

    async def settle(self, raise_failure=True) -> None:
        """Wait until every notification sent so far is stored and sent; raise the first failure
        (or only log it)."""
        while self._notifying:
            await asyncio.wait(list(self._notifying))
        if raise_failure:
            self._raise_failure()
        elif self._notify_failure is not None:
            failure, self._notify_failure = self._notify_failure, None
            logger.warning("a notification of request %r was not stored: %s", self.request_id, failure)

    def _raise_failure(self):
        failure, self._notify_failure = self._notify_failure, None
        if failure is not None:
            raise failure

    async def close_stream(self, retry_ms=None) -> None:
        await self.settle()  # what the tool sent before is on the connection it closes
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.finish_with_retry(retry_ms)

    # -- as the request pipeline's stream (running/pipeline.py: CallStream) --------------------

    @property
    def channel(self):
        return self  # a tool's Context talks to the stream itself

    def start(self, work) -> asyncio.Task:
        """Run the request's work in its own task; it outlives the connection ("Disconnection
        SHOULD NOT be interpreted as the client cancelling its request"), and a cancel from any
        process reaches it (control.py)."""
        key = (self.session_id, self.stream_key)
        local_streams[key] = self
        task = asyncio.get_running_loop().create_task(self._running(work))
        _tasks.add(task)
        task.add_done_callback(_tasks.discard)
        task.add_done_callback(lambda _task: local_streams.pop(key, None))
        return task

    async def _running(self, work):
        await control.ensure_listening()
        self._running_key = (self.session_id, control.request_key(self.request_id))
        control.running[self._running_key] = (self, asyncio.current_task())
        try:
            await work
        finally:
            control.running.pop(self._running_key, None)

    def answers_cancel(self) -> bool:
        """A cancel by request (or the session's end) gets the stream's terminal marker."""
        return self.cancelled

    async def claim(self) -> bool:
        # No cancel reaches the request once its answer is being written.
        control.running.pop(self._running_key, None)
        return await control.claim_answer(self)

    async def finish(self, message, error=None) -> None:
        await _emit_final(self, message)

    async def request(self, method: str, params: dict, timeout=None, park=True, **_options) -> dict:
        """Send a server-to-client request on this stream and wait for the reply, which may
        arrive as a POST at any process: it comes back through Redis (``deliver_reply``); for
        ``timeout`` seconds at most (CLIENT_REQUEST_TIMEOUT by default).

        ``park`` False: a sync tool asks, whose OS thread waits (methods/threads.py). On a
        Streamable HTTP stream its wait also ends once nobody has read the stream for
        CLIENT_GONE_SECONDS: the client disconnected and did not resume, and no answer is coming
        to hold a place for.
        (``_options``: what a 2026-07-28 round uses, rounds.py; nothing here.)"""
        client, names = async_redis(), keys()
        outbound_id = await next_outbound_id(self.session_id, timeout)
        reply_key = names.reply(self.session_id, outbound_id)
        gone_after = None if park or not self.own_connection else get_config()["CLIENT_GONE_SECONDS"]
        async with doorbell().listen(reply_key) as subscription:
            self._asking.add(subscription)
            try:
                await self.emit(request_message(outbound_id, method, params))
                raw = await _wait_for_reply(client, reply_key, subscription, self, timeout,
                                            gone=None if gone_after is None else ReaderWatch(self, gone_after))
            finally:
                self._asking.discard(subscription)
        if raw is ClientGone:
            await self._give_up(outbound_id, method, "the client went away")
        if raw is None:
            await self._give_up(outbound_id, method)
        reply = json.loads(raw)
        if reply.get("error") is not None:
            raise ClientRequestError(method, reply["error"])
        return reply.get("result") or {}

    async def _give_up(self, outbound_id, method, why="no answer in time"):
        # "the sender SHOULD issue a cancellation notification for that request and stop
        # waiting for a response" -- spec 2025-11-25 basic/lifecycle (Timeouts)
        await self.notify("notifications/cancelled", {"requestId": outbound_id, "reason": why})
        raise ClientRequestError(method, {"code": ErrorCode.INTERNAL_ERROR, "message": why})

    async def has_reader(self) -> bool:
        """Someone reads this stream: its connection here, or a resume anywhere (its reader claim)."""
        writer = self._writer
        if writer is not None and not writer.closed:
            return True
        return bool(await async_redis().exists(keys().reader(self.session_id, self.stream_key)))


#: What _wait_for_reply returns when the client went away (ReaderWatch).
ClientGone = object()


class ReaderWatch:
    """Tells when a stream has had no reader for ``seconds``: looked at between the waits for
    an answer (a Redis read only while no connection of this process reads the stream)."""

    def __init__(self, stream, seconds: float):
        self.stream, self.seconds = stream, seconds
        self.unread_since = None

    async def gone(self, now: float) -> bool:
        if await self.stream.has_reader():
            self.unread_since = None
            return False
        if self.unread_since is None:
            self.unread_since = now
        return now - self.unread_since >= self.seconds


def _fitted(message) -> tuple:
    """The message as it is stored (MAX_EVENT_BYTES: an error, or None when dropped) and its
    JSON, encoded once for the store and the frame."""
    data = dumps(message) if message is not None else b""
    return quotas.within_event_size(message, data)


class JsonReplyChannel:
    """The channel of a request answered with plain JSON: nothing can precede the result.

    Used only when the client does not accept SSE; progress and logs are dropped, and requests
    to the client fail (the tool gets an error it can report)."""

    cancelled = False

    def __init__(self, request_id):
        self.request_id = request_id

    async def notify(self, method, params):
        return None

    async def request(self, method, params, **_options):
        raise ClientCapabilityError(f"Cannot send {method}: the client accepts only a JSON reply.")

    async def close_stream(self, retry_ms=None):
        return None


async def next_outbound_id(session_id: str, timeout=None) -> int:
    """The id of the session's next server-to-client request (unique across processes), which
    its client may answer from now on, once, for ``timeout`` (CLIENT_REQUEST_TIMEOUT) seconds and
    a grace: ``deliver_reply`` takes only answers to questions asked."""
    names, client = keys(), async_redis()
    async with client.pipeline(transaction=False) as pipe:
        pipe.incr(names.outbound_ids(session_id))
        pipe.expire(names.outbound_ids(session_id), sessions.side_key_ttl())
        outbound_id, _ = await pipe.execute()
    await client.set(names.asked(session_id, outbound_id), "1", ex=_answerable_for(timeout))
    return outbound_id


def _answerable_for(timeout) -> int:
    """How long a question of ours may be answered: its wait, and a grace for an answer already
    on its way (a parked job's question is found by its key for as long)."""
    return int(timeout or get_config()["CLIENT_REQUEST_TIMEOUT"]) + 120


async def _wait_for_reply(client, reply_key, subscription, stream, timeout=None, gone=None):
    """The client's raw reply; None after ``timeout``; ClientGone once ``gone`` (a ReaderWatch)
    finds that nobody reads the stream any more."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + (get_config()["CLIENT_REQUEST_TIMEOUT"] if timeout is None else timeout)
    step = 5.0 if gone is None else max(min(5.0, gone.seconds / 2), 0.1)
    while loop.time() < deadline:
        if stream.cancelled:
            raise ToolCancelled(f"Request {stream.request_id!r} was cancelled while it waited for the client.")
        await subscription.wait(min(step, max(0.0, deadline - loop.time())))
        raw = await client.getdel(reply_key)  # also the fallback if a doorbell was lost
        if raw is not None:
            return raw
        if gone is not None and await gone.gone(loop.time()):
            return ClientGone
    return None


#: For the worker's 2026-07-28 questions (worker.JobChannel), which wait the same way.
wait_for_reply = _wait_for_reply


async def deliver_reply(session_id: str, reply: dict) -> None:
    """A client's answer to one of our requests, handed to whichever process waits for it.

    Only to a request this server sent and still waits on, and once: an answer sent before its
    question (the ids are sequential), to another or an expired one, or a second answer, is
    accepted and dropped ("If the server accepts the input, the server MUST return HTTP status
    code 202 Accepted"; a late answer is a race the client cannot avoid). Before, it waited in
    Redis for its question: a confirmation asked later found its "yes" there, and a tool acted
    without its user ever seeing the question."""
    if not await async_redis().delete(keys().asked(session_id, reply["id"])):
        logger.info("a response to request %s, which waits for none, was dropped",
                    client_value(json.dumps(reply["id"])))
        return
    parked_job = await replies.hand_over(session_id, reply)
    if parked_job is not None:  # a background job gave its worker back to wait for this answer
        from .jobs import following

        await following.resume_parked(parked_job, reply)


# -- running requests and cancellation -------------------------------------------------------

async def open_request_stream(session_id: str, request_id, attach) -> RequestStream:
    """A request's stream of its own (pipeline.CallStream), listed for liveness checks while
    ``attach(stream)`` opens it on the transport (both at once: one wait)."""
    stream = RequestStream(session_id, request_id, ids.new_stream_key())
    await asyncio.gather(control.register_call(stream), attach(stream))
    return stream


async def _emit_final(stream, message, attempts=5):
    """The response must reach the store: retry through a Redis hiccup rather than leave the
    request unanswered (its process is alive, so no one else would answer it)."""
    for attempt in range(attempts):
        try:
            return await stream.emit(message, final=True)
        except Exception:
            if attempt == attempts - 1:
                raise
            logger.warning("storing the response of %r failed; retrying", stream.request_id, exc_info=True)
            await asyncio.sleep(0.2 * 2 ** attempt)


async def request_cancel(session_id: str, request_id) -> None:
    """Ask whichever process runs the request to stop it."""
    await control.publish("cancel", session_id, r=control.request_key(request_id))


async def answer_orphan(session_id: str, stream_key: str) -> bool:
    """Write the error response of a request whose process died, if it is one (control.py);
    a background job's stream is watched by jobs/settling.py (its worker may be lost)."""
    from .jobs import settling

    call = await control.read_call(session_id, stream_key)
    if not call:  # Redis lost the record (restarted empty): a background call's row still knows
        call = await settling.recall(session_id, stream_key)
    if "job" in call:
        return await settling.watch(session_id, stream_key, call)
    request_id = await control.claim_orphan(session_id, stream_key, call)
    if request_id is None:
        return False
    metrics.incr("orphans_answered")
    logger.warning("request %s lost its process; answered it with an error", json.dumps(request_id),
                   extra={"mcp_session_id": session_id, "mcp_request_id": request_id})
    orphan = error_message(request_id, ErrorCode.INTERNAL_ERROR,
                           "The server process running this request stopped before it answered.")
    await get_event_store().append(session_id, stream_key, orphan, final=True)
    return True


async def rounds(bell, quiet: float, on_quiet, *, first=True, going=lambda: True):
    """The follow loop of every follower: when to read what it follows. Yields what rang (the
    doorbell's message, ``bell`` subscribed by the caller), or None when it should read all it
    follows: at once (``first``), and whenever the doorbell stays silent for ``quiet`` seconds,
    after ``on_quiet()`` did the follower's housekeeping (answering an orphaned request, keeping
    a claim or a session alive). A lost ring delays an event, never loses it. It ends when
    ``on_quiet()`` returns False or ``going()`` does."""
    if first:
        yield None
    while going():
        rung = await bell.wait(quiet)
        if rung is None and not await on_quiet():
            return
        yield rung


async def tail(session_id: str, stream_key: str, position: str, bell, quiet: float, on_quiet):
    """One stream followed (a resumed GET's, a 2026-07-28 call's job, a task's): its events
    after ``position`` as they are appended, up to its final event (yielded too), read on each
    of ``rounds``."""
    store = get_event_store()
    async with contextlib.aclosing(rounds(bell, quiet, on_quiet)) as reads:
        async for _ in reads:
            for event in await store.read_after(session_id, stream_key, position):
                position = event.id.position
                yield event
                if event.final:
                    return
