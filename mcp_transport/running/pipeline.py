"""One call's life, whichever transport carried it: from a parsed request of an authenticated
caller to its one answer.

Each transport (2025-11-25 Streamable HTTP, stdio, 2024-11-05 HTTP+SSE; the 2026-07-28 era for
the steps it shares) adapts to it through a small ``Responder``: answer with one message, open
the stream a call's messages go on, open the stream a background job writes. The pipeline
owns the rest, in this order, so that a safeguard added here holds on every front door (as
Django's ``BaseHandler`` does for its middleware, Celery's ``build_tracer`` for a task's life):

1. the span (tracing.py) and the calls-log record (calls.py): exactly one each per request,
   including ``initialize`` and the requests refused before they run (``refused``);
2. the era's own checks (``check``: the session's state, the progress token), then the scopes
   of the target (403, raised: the transport answers it as HTTP);
3. the quota (``admit``): MAX_CALLS_PER_SESSION or MAX_CALLS_PER_CALLER, 429 as an answer;
4. inline, on a stream of its own (its task answers and releases: streams.py), or in a Celery
   worker (jobs.py; "could not be started" is an answer too);
5. the release of the quota before the answer goes out (the client may send its next call as
   soon as it has it), and the record.
"""
import asyncio
import contextlib
import logging
from typing import Awaitable, Callable, Optional, Protocol

from .. import auth, tracing
from . import calls, jobs, streams
from ..methods.dispatch import Call, answer, counts_as_call, may_send, runs_in_background, target_spec
from ..methods.registry import registry
from ..protocol import ids, jsonrpc
from ..protocol.errors import ErrorCode, ProtocolError
from ..protocol.jsonrpc import Request
from ..state import control, quotas
from ..storage import get_event_store

logger = logging.getLogger(__name__)


class Responder(Protocol):
    """How one transport delivers one call's answer."""

    def wants_stream(self, may_send: bool) -> bool:
        """Whether the call's messages and answer go on a stream (``may_send``: the method may
        send before its result) rather than as one message. (``open_stream`` and
        ``open_job_stream`` are not needed of an era that runs its calls itself: ``serve(run=)``.)"""

    async def answer(self, request: Request, message: dict, error: Optional[ProtocolError] = None) -> None:
        """Send the call's one answer as a single message (``error``: the refusal it says, whose
        HTTP status and headers an HTTP transport answers with)."""

    async def open_stream(self, stream: streams.RequestStream) -> None:
        """Open the stream the call's messages and answer go on (its task writes them)."""

    async def open_job_stream(self, stream_key: str) -> Optional[Callable[[], Awaitable[None]]]:
        """Open the stream a background job will write; returns what follows it once the job is
        submitted (or None: the transport's follower finds it)."""


def begin(request: Request, session, headers=None, transport: str = "http", **facts) -> Call:
    """The Call of a request that starts now, with its span (current in this task)."""
    call = Call(session=session, **facts)
    call.span = tracing.start(request, session, headers, transport)
    return call


async def answered(request: Request, call: Call, responder: Responder, message: dict,
                   error: Optional[ProtocolError] = None) -> None:
    """Send the call's one answer as a single message, and record it."""
    await responder.answer(request, message, error)
    calls.finished(request, call, message)


async def refused(request: Request, call: Call, responder: Responder, exc: ProtocolError,
                  message: Optional[dict] = None) -> None:
    """Answer a request refused before it ran (its state, its arguments, a quota) with the error,
    or ``message`` (the era's form of it)."""
    message = message or jsonrpc.error_message(request.id, exc.code, exc.message)
    await answered(request, call, responder, message, exc)


async def serve(request: Request, call: Call, responder: Responder, *, admit, check=None, scope=None,
                headers=None, run: Optional[Callable[[bool, bool], Awaitable[None]]] = None,
                refusal: Optional[Callable[[ProtocolError], dict]] = None) -> None:
    """Serve one request (``call`` from ``begin``). ``admit(background)`` returns the call's
    quota slot or raises the 429; ``check()``: the era's own checks, raising the ProtocolError it
    is answered with; ``scope`` and ``headers``: the HTTP request that carried it, whose
    principal needs the target's scopes (none for stdio). ``run(streamed, background)``: an era
    that answers its admitted calls on responses of its own (2026-07-28: no event store, no
    resumption) runs them so, answering and recording each (a task it starts sets
    ``call.started`` and frees the call's place at its end); ``refusal(exc)``: the era's form of
    an error answer."""
    try:
        if check is not None:
            await check()
    except ProtocolError as exc:
        return await refused(request, call, responder, exc, refusal and refusal(exc))
    if scope is not None:
        check_scopes(request, call, scope, headers)
    streamed = responder.wants_stream(may_send(request))
    background = streamed and runs_in_background(request, call.principal)
    if counts_as_call(request):  # a background tool's job counts too, until it ends
        try:
            call.quota = await admit(background)
        except ProtocolError as exc:  # 429: the session or caller runs its most calls already
            return await refused(request, call, responder, exc, refusal and refusal(exc))
    if run is not None:
        try:
            return await run(streamed, background)
        finally:
            if not call.started:
                await quotas.release_call(call.quota)  # a no-op once a job holds its place
    try:
        if background:
            try:
                return await hand_to_job(request, call, responder)
            finally:
                await quotas.release_call(call.quota)  # nothing left to free once its job holds it
        if streamed:
            return await run_on_stream(request, call, responder)
        # A one-message answer has nowhere to put messages sent before the result: dropped.
        call.channel = streams.JsonReplyChannel(request.id)
        message = await answer(request, call)
    except BaseException:
        if not call.started:
            await quotas.release_call(call.quota)
        raise
    await quotas.release_call(call.quota)
    await answered(request, call, responder, message)


async def run_on_stream(request: Request, call: Call, responder: Responder) -> None:
    """Run the request on a stream of its own; its task answers, releases the quota, records."""
    stream = call.channel = streams.RequestStream(call.session.id, request.id, ids.new_stream_key())
    await asyncio.gather(control.register_call(stream), responder.open_stream(stream))
    await streams.start(stream, request, call)


async def hand_to_job(request: Request, call: Call, responder: Responder) -> None:
    """A background tool: a worker runs it (jobs.py) and appends what it sends to a stream of
    its own, which the transport follows. The stream is open before the job is submitted, so
    the client may resume it anywhere: it must end with an answer, even "could not be started"."""
    params, session, stream_key = request.params, call.session, ids.new_stream_key()
    follow = await responder.open_job_stream(stream_key)
    try:
        job = await jobs.submit(registry.tools[params["name"]], params.get("arguments") or {},
                                session_id=session.id, request_id=request.id, stream_key=stream_key,
                                user_id=call.principal.user_id, principal=call.principal.key,
                                progress_token=jsonrpc.progress_token(params), slot=call.quota)
    except Exception:
        logger.exception("submitting a job of %s failed", params["name"])
        failed = job_failed(request)
        await get_event_store().append(session.id, stream_key, failed, final=True)
        calls.finished(request, call, failed)
    else:
        calls.finished(request, call, None, status=calls.McpCall.Outcome.BACKGROUND, job_id=job.id)
    if follow is not None:
        await follow()


def job_failed(request: Request) -> dict:
    """The answer of a background call whose job could not be queued (the broker is down)."""
    name = request.params.get("name")
    return jsonrpc.error_message(request.id, ErrorCode.INTERNAL_ERROR, f"Tool {name} could not be started.")


def check_scopes(request: Request, call: Call, scope, headers) -> None:
    """403 ``insufficient_scope`` before anything starts (auth.require_spec_scopes): raised for
    the transport to answer as HTTP, and recorded as the call's answer."""
    try:
        auth.require_spec_scopes(target_spec(request), call.principal, scope, headers)
    except ProtocolError as exc:
        calls.finished(request, call, jsonrpc.error_message(request.id, exc.code, exc.message))
        raise


@contextlib.contextmanager
def recording_failure(request: Request, call: Call):
    """A ProtocolError raised in the block (the transport answers it as HTTP: 403, 429 ...) is
    the call's answer in its record and span, then goes on up."""
    try:
        yield
    except ProtocolError as exc:
        calls.finished(request, call, jsonrpc.error_message(request.id, exc.code, exc.message))
        raise
