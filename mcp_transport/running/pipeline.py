"""One call's life, whichever era and transport carried it: from a parsed request of an
authenticated caller to its one answer. This is the run phase, written once.

Each transport (Streamable HTTP in both eras, stdio, 2024-11-05 HTTP+SSE) adapts to it through
a small ``Responder``: its era's rules and the form of its answers, and how a stream of the
call's own reaches the client. The pipeline owns everything else, in this order, so that a safeguard added
here holds on every front door (as Django's ``BaseHandler`` does for its middleware, Celery's
``build_tracer`` for a task's life):

1. ``begin``: the Call, its Caller (auth/callers.py: made once, read by every per-caller limit),
   its span (tracing.py); the calls-log record (calls.py) is made exactly once per request,
   including ``initialize`` and the requests refused before they run (``refused``);
2. ``serve``: the call's Route (routes.py: its method's facts and its tool, looked up once), the
   caller's REQUEST_RATE_LIMIT (state/request_rates.py: every request, whatever its method, takes
   a token of its caller's bucket; 429 as an answer), the era's own checks (``Responder.check``:
   a session's state, a request's ``_meta``), then the scopes of the target (403, raised: the
   transport answers it as HTTP);
3. the route planned (``Route.plan``: inline, on a stream, or a background job, whose
   arguments it binds), then admission (``admit``): MAX_CALLS_PER_SESSION for a session's
   call, MAX_CALLS_PER_CALLER for a sessionless one, and a tools/call's place in its caller's
   RATE_LIMIT window (``Route.rate_charge``; taken by the same script, or already by a
   2025-11-25 session's read), 429 as an answer. A request refused at any step gives its place
   in the window back;
4. the run: inline, its ``Answer`` returned for the transport to write; on a stream of its own
   (a task of its own answers); or, for a background tool in an era whose streams are
   resumable, in a Celery worker that writes the call's stream (``run_in_worker``; "could not be
   started" is an answer too). The modern era relays a background tool's job on the call's own
   stream, so its call runs the second way;
5. the release of the call's place before the answer goes out (the client may send its next
   call as soon as it has it), and the record.

From its run to its answer a call is tracked (drain.py): a process told to stop waits for it,
and answers it with an error if its grace runs out first.

The fairness key of the call's sync code (methods/threads.py) is its ``owner``: its session, or
its caller's key when it has none, set here for every era.
"""
import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, NamedTuple, Optional, Protocol

from .. import auth, tracing
from . import calls, drain, jobs
from .routes import Route
from ..auth.callers import Caller
from ..methods.context import ToolCancelled
from ..methods.dispatch import Call, target_spec
from ..methods.specs import MethodTable
from ..protocol import ids, jsonrpc
from ..protocol.errors import ErrorCode, ProtocolError
from ..protocol.jsonrpc import Request
from ..state import quotas, rates, request_rates, sessions
from ..storage import get_event_store

logger = logging.getLogger(__name__)


class CallStream(Protocol):
    """The stream one call's messages and answer go on (``Responder.open_stream``)."""

    #: What the call's Context talks to (notify, request, close_stream, cancelled).
    channel: Any

    def start(self, work: Awaitable[None]) -> asyncio.Task:
        """Run the call's work in a task: one that outlives the connection (2025-11-25: a
        disconnect is not a cancel), or one cancelled with it (2026-07-28: it is)."""

    def answers_cancel(self) -> bool:
        """The work was cancelled: True if the call still ends with an answer (a cancel by
        request ends a resumable stream with its terminal marker), False if nobody is left."""

    async def claim(self) -> bool:
        """The right to give the call's one answer (False: another process answered it)."""

    async def finish(self, message: Optional[dict], error: Optional[ProtocolError]) -> None:
        """Send the call's answer (None: cancelled) and end the stream."""


@dataclass(frozen=True)
class EraRules:
    """What an era says of every call, whatever carries it, that the run phase reads: one value
    per era (``eras/*/era.py: RULES``)."""

    #: The era's methods (their facts: counts as a call, may send before its result).
    methods: MethodTable
    #: A background tool's job writes the call's own stream, which a client may resume
    #: anywhere (sessions); False: the job is relayed on the call's stream like any streamed
    #: call (stateless), by the handler ``handle`` runs it.
    resumable_jobs: bool
    #: A handler's ProtocolError is answered in-band, with 200 (2025-11-25); False: with the
    #: status the era gives it (2026-07-28: 404 for an unknown method...).
    in_band_errors: bool


class Responder(Protocol):
    """What one era and transport contribute to a call, nothing else. The era's half
    (eras/*/era.py): its rules, its checks, its handler and the form of its answers. The
    transport's half (transports/), mixed in: whether a call runs on a stream of its own, and
    that stream."""

    # -- the era's ---------------------------------------------------------------------------

    #: What the era says of every call (one value per era).
    rules: EraRules

    async def check(self, request: Request, call: Call) -> None:
        """The era's checks, raising the ProtocolError the request is refused with."""

    async def handle(self, request: Request, call: Call) -> dict:
        """The request's result in this era, or the ProtocolError it raises (``call.background``:
        a background tool's call, in an era that relays its job on the call's stream). A call
        answered with one message comes without a channel (``call.channel`` None): the era gives
        it its own, what the call's Context talks to."""

    def result_reply(self, request: Request, result: dict) -> dict:
        """The era's form of a result."""

    def error_reply(self, request_id, exc: ProtocolError) -> dict:
        """The era's form of an error."""

    # -- the transport's ---------------------------------------------------------------------

    def wants_stream(self, may_send: bool, blocks: bool = False) -> bool:
        """Whether the call runs on a stream of its own (``may_send``: its method may send
        before its result; ``blocks``: it runs the project's sync code, which a stream's task
        can cancel) rather than answering with one message."""

    async def open_stream(self, request: Request, call: Call) -> CallStream:
        """Open the stream the call's messages and answer go on, written by this process."""

    async def open_job_stream(self, stream_key: str) -> Optional[Callable[[], Awaitable[None]]]:
        """(``rules.resumable_jobs`` only) Open the stream a background job's worker will write;
        returns what follows it once the job is submitted (or None: the transport's follower
        finds it)."""


class Answer(NamedTuple):
    """A call's one answer as a single message, for its transport to write: the era's message,
    and the ProtocolError it says (whose HTTP status and headers an HTTP transport answers with)."""

    message: dict
    error: Optional[ProtocolError] = None


def begin(request: Request, session, headers=None, transport: str = "http", *, address: str = "",
          caller: Optional[Caller] = None, **facts) -> Call:
    """The Call of a request that starts now: its caller (made once: ``caller``, or of its
    principal, else its address), its span (current in this task) and its fairness owner: its
    session, else its caller."""
    call = Call(session=session, address=address, caller=caller, **facts)
    call.owner = session.id or call.caller.key
    if session.id and request.method != "initialize":
        sessions.used(session)  # its row, once it did something (state/session_rows.py)
    call.span = tracing.start(request, session, headers, transport)
    return call


def record(request: Request, call: Call, message: Optional[dict], **outcome) -> Optional[Awaitable]:
    """The call's one calls-log record (and the end of its span, its one observation of the
    operation duration); a second one is not made. Returns what its answer waits for: a
    state-changing call's row in the audit trail (calls.Trail), else None."""
    if not call.recorded:
        call.recorded = True
        return calls.finished(request, call, message, **outcome)
    return None


async def recorded(request: Request, call: Call, message: Optional[dict], **outcome) -> None:
    """``record``, returning once a state-changing call's row is in the database: "the client
    learns of a change" only after the audit trail holds it."""
    written = record(request, call, message, **outcome)
    if written is not None:
        await written


async def refused(request: Request, call: Call, responder: Responder, exc: ProtocolError) -> Answer:
    """The answer of a request refused before it ran (its state, its arguments, a quota), once
    recorded; it takes no place in its caller's rate window."""
    await rates.give_back(call.rate)
    message = responder.error_reply(request.id, exc)
    await recorded(request, call, message)
    return Answer(message, exc)


async def serve(request: Request, call: Call, responder: Responder, *, scope=None, headers=None) -> Optional[Answer]:
    """Serve one request (``call`` from ``begin``): its one-message answer, recorded, for the
    transport to write, or None when it answers on a stream of its own. ``scope`` and
    ``headers``: the HTTP request that carried it, whose principal needs the target's scopes
    (none for stdio)."""
    route = call.route = call.route or Route.of(request, responder.rules.methods)
    request = route.request  # call_tool(name, arguments) is that tool's own call: every rule applies to it
    try:
        if not route.opens_session:  # SESSION_OPEN_RATE counts those
            await request_rates.admit(call.caller.key)
        if route.refusal is not None:
            raise route.refusal
        await responder.check(request, call)
    except ProtocolError as exc:
        return await refused(request, call, responder, exc)
    if scope is not None:
        try:
            check_scopes(request, call, scope, headers)
        except ProtocolError:
            await rates.give_back(call.rate)
            raise
    route.plan(call.principal, responder.wants_stream)
    call.background = route.background
    if route.counts_as_call:  # a background tool's job counts too, until it ends
        if call.rate is None:
            call.rate = route.rate_charge(call.caller)
        try:
            call.quota = await admit(call, route.background)
        except ProtocolError as exc:  # 429: the session or caller runs its most calls already, or spent its rate
            return await refused(request, call, responder, exc)
    try:
        if route.background and responder.rules.resumable_jobs:
            return await run_in_worker(request, call, responder)
        if route.streamed:
            return await run_on_stream(request, call, responder)
        return await run_inline(request, call, responder)
    finally:
        if not call.started:
            await quotas.release_call(call.quota)  # a no-op once released, or once a job holds it


def admit(call: Call, background: bool) -> Awaitable[quotas.Slot]:
    """The call's place: among its session's calls (``call.running_calls``: its session's
    running background calls, if its read counted them), or its caller's when it has no session
    (and in its caller's rate window, ``call.rate``)."""
    if call.session.id:
        return quotas.admit_call(call.session.id, call.running_calls, background=background, rate=call.rate)
    return quotas.admit_caller(call.caller.key, background, call.rate)


async def respond(request: Request, call: Call, responder: Responder) -> tuple:
    """(the era's answer, the error whose status it is answered with) of running the request:
    its result, or the error it raised (-32603, and a log record, for one nobody meant). A
    cancel (ToolCancelled, asyncio's) goes through, unless its process's drain stopped the
    call: that is answered (drain.stopped_error)."""
    call.handling = True  # what a drain's deadline stops (drain.stop_handlers)
    try:
        result = await responder.handle(request, call)
    except ProtocolError as exc:
        return responder.error_reply(request.id, exc), None if responder.rules.in_band_errors else exc
    except (ToolCancelled, asyncio.CancelledError):
        if not call.stopped:
            raise
        # The process is stopping and the call ran past its grace (drain.py): it still gets
        # its one answer, the way any answer goes (stored first on a stream), in-band.
        asyncio.current_task().uncancel()
        return responder.error_reply(request.id, drain.stopped_error()), None
    except Exception:
        logger.exception("%s failed", request.method)  # the record carries the (short) session id
        return jsonrpc.error_message(request.id, ErrorCode.INTERNAL_ERROR, "Internal error."), None
    finally:
        call.handling = False
    return responder.result_reply(request, result), None


async def run_inline(request: Request, call: Call, responder: Responder) -> Answer:
    """A one-message answer: it has nowhere to put messages sent before the result (the era's
    ``handle`` gives the call its channel)."""
    task = drain.tracking(call)  # a process told to stop waits for the answer
    try:
        answer = Answer(*await respond(request, call, responder))
        await quotas.release_call(call.quota)
        await recorded(request, call, answer.message)
        return answer
    finally:
        drain.untrack(task)


async def run_on_stream(request: Request, call: Call, responder: Responder) -> None:
    """Run the request on a stream of its own, in a task of its own that answers, releases the
    call's place and records it."""
    stream = await responder.open_stream(request, call)
    call.channel = stream.channel
    call.started = True
    task = stream.start(_answer_on(stream, request, call, responder))
    drain.track(task, call)  # a process told to stop waits for its answer
    # A done callback runs however the task ends, even cancelled before its first step.
    task.add_done_callback(lambda _task: _unanswered(request, call))


async def _answer_on(stream: CallStream, request: Request, call: Call, responder: Responder) -> None:
    try:
        message, error = await respond(request, call, responder)
    except (asyncio.CancelledError, ToolCancelled):
        if not stream.answers_cancel():
            raise
        # "Receivers ... SHOULD: Not send a response for the cancelled request." -- spec
        # 2025-11-25 basic/utilities/cancellation. The stream ends with a terminal marker.
        message = error = None
    finally:
        # Before the response goes out: the client may send its next call as soon as it has it.
        await quotas.release_call(call.quota)
    if getattr(call.channel, "cancelled", False) and not call.stopped:
        message = error = None
    if not await stream.claim():  # exactly one response, even after a long stall
        call.recorded = True  # another process answered it (an orphan's answer), and records nothing
        return
    await recorded(request, call, message)
    await stream.finish(message, error)


def _unanswered(request: Request, call: Call) -> None:
    """The call's task ended without its answer (its client left, or it failed): its record
    says cancelled, and its place is freed (a task cancelled before its first step never ran
    the ``finally`` that frees it)."""
    record(request, call, None)
    if call.quota is not None and call.quota.token is not None:
        asyncio.ensure_future(quotas.release_call(call.quota))


async def run_in_worker(request: Request, call: Call, responder: Responder) -> None:
    """A background tool: a worker runs it (running/jobs/submitting.py) and appends what it sends to a stream of
    its own, which the transport follows. The stream is open before the job is submitted, so
    the client may resume it anywhere: it must end with an answer, even "could not be started"."""
    params, session, stream_key = request.params, call.session, ids.new_stream_key()
    follow = await responder.open_job_stream(stream_key)
    try:
        job = await jobs.submit(call.route.tool, params.get("arguments") or {},
                                session_id=session.id, request_id=request.id, stream_key=stream_key,
                                user_id=call.principal.user_id, principal=call.principal.key,
                                progress_token=jsonrpc.progress_token(params), slot=call.quota,
                                caller=call.caller.key)
    except Exception:
        logger.exception("submitting a job of %s failed", params["name"])
        failed = job_failed(request)
        await get_event_store().append(session.id, stream_key, failed, final=True)
        record(request, call, failed)
    else:
        await recorded(request, call, None, status=calls.McpCall.Outcome.BACKGROUND, job_id=job.id)
    if follow is not None:
        await follow()


def job_failed(request: Request) -> dict:
    """The answer of a background call whose job could not be queued (the broker is down)."""
    name = request.params.get("name")
    return jsonrpc.error_message(request.id, ErrorCode.INTERNAL_ERROR, f"Tool {name} could not be started.")


def check_scopes(request: Request, call: Call, scope, headers) -> None:
    """403 ``insufficient_scope`` before anything starts (auth.require_spec_scopes): raised for
    the transport to answer as HTTP, and recorded as the call's answer."""
    route = call.route
    target = route.tool if route.tool is not None else target_spec(request) if route.spec.scoped else None
    try:
        auth.require_spec_scopes(target, call.principal, scope, headers)
    except ProtocolError as exc:
        record(request, call, jsonrpc.error_message(request.id, exc.code, exc.message))
        raise
