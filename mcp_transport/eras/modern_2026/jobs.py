"""Plain (not task) 2026-07-28 calls of background tools: the job runs in a Celery worker, and
the web process serving the call relays what it sends until its result.

Disconnect = cancel: "Closing the SSE response stream MUST be treated by the server as
cancellation of that request ... The server SHOULD stop work" (spec 2026-07-28 transports): a
call whose client goes away cancels its job (revoked if no worker took it yet, ``ctx.cancelled``
otherwise), and nothing more is sent for it.

Questions (multi-round trip, SEP-2322). The round ends with an ``InputRequiredResult`` whose
sealed ``requestState`` names the job and how far the call's stream was read, and the job parks
(jobs.py: its worker slot is free, its questions stay). The retry, on any web process, hands the
job its answers (following.deliver_inputs, which queues it again: it runs from its start with them)
and relays the stream from there, to the result or the next question. The job is not cancelled
while it waits for a retry (the round ended with a complete response); a question waits
``CLIENT_REQUEST_TIMEOUT`` at most.

Answers only to questions asked: the state also records the round's questions (key and digest,
protocol/mrtr.py), and the retry hands the job only the answers to those, each to the same
question still open on the job. A request without a state is a new call: its job asks again.
The answers a request gives to keys it was not asked are kept for the job as answers given
ahead, which only a question the tool declares ``answerable_ahead`` takes (running/jobs/following.py).
"""
import asyncio
import logging
from contextlib import aclosing

from ...running import job_streams, jobs
from ...running.jobs import following, rows
from ...running.routes import TOOLS_CALL as METHOD  # the method whose request state a job's rounds seal
from . import request_state
from .tasks import stateless_session_id
from ...logs import short_id
from ...protocol import mrtr
from ...protocol.errors import InvalidParams
from ...protocol.ids import new_stream_key

logger = logging.getLogger(__name__)

#: The error a job cancelled by its client's leaving keeps (the admin shows it).
CLIENT_LEFT = "The client closed the request."


async def call(spec, params: dict, call, request_id, notify):
    """Serve the call (or one round of it): the final JSON-RPC message of the job (its result;
    None if it was cancelled) or, when the tool waits on the client, an ``InputRequiredResult``
    (a dict with ``resultType``). ``notify(method, params)`` relays the job's notifications.

    Whatever step the call is at when its task is cancelled (the client closed the response),
    its job is cancelled: one being created or queued again first runs to its end, then is
    cancelled (a job cancelled while queued never starts, running.jobs.acancel)."""
    payload = request_state.payload_of(params, METHOD, call)
    responses = mrtr.input_responses(params)
    left = client_left(call)
    if "job" in payload:
        job, position = await _resumed(payload)
        asked = payload.get("asked") if isinstance(payload.get("asked"), dict) else {}
        await _then_cancel_if_left(following.deliver_inputs(job, responses, asked=asked), lambda _queued: job.id,
                                   left)
    else:
        job = await _then_cancel_if_left(_submit(spec, params, call, request_id, responses),
                                         lambda submitted: submitted.id, left)
        position = "0-0"
    call.job_id = job.id  # the calls log links the call to its job
    ended = False  # the round ended: the job's final event, or a question for the client
    try:
        # Questions still unanswered after this retry were asked before ``position``: ask again.
        waiting = await following.pending_inputs(job) if "job" in payload else None
        outcome = (waiting, position) if waiting else await follow(job, position, notify)
        ended = True
        if isinstance(outcome, tuple):
            inputs, position = outcome
            state = request_state.seal(METHOD, params, call, {"job": job.id, "position": position,
                                                              "asked": mrtr.question_digests(inputs)})
            return mrtr.input_required_result(inputs, state)
        return outcome
    finally:
        if not ended:
            # The client went away (or this process failed) before the call ended: cancel it. No
            # await before the cancel is under way: a second cancel of this task would skip it.
            cancel_soon(job.id, left)


#: Cancels (and job submissions a cancel waits for) under way: asyncio keeps only weak
#: references to tasks, and one of these must not be collected before it ran.
_under_way = set()


def _hold(task):
    _under_way.add(task)
    task.add_done_callback(_under_way.discard)
    return task


def client_left(call) -> "jobs.Stop":
    """How the audit trail records the stop of a job whose call's client left: "disconnect", by
    the call's caller (its principal and client address)."""
    return jobs.Stop("disconnect", call.principal.key if call.principal is not None else "", call.address or "")


def cancel_soon(job_id: str, stop: "jobs.Stop") -> None:
    """Cancel the job in a task of its own (the caller's task may be being cancelled)."""
    _hold(asyncio.get_running_loop().create_task(_cancel(job_id, stop)))


async def _cancel(job_id: str, stop: "jobs.Stop") -> None:
    try:
        cancelled = await rows.riding_out_database(jobs.acancel, job_id, CLIENT_LEFT, stop)
        logger.info("job %s %s: its client closed the request", short_id(job_id),
                    "cancelled" if cancelled else "had ended already")
    except Exception:
        logger.exception("cancelling job %s of a closed request failed", job_id)


async def _then_cancel_if_left(work, job_id_of, stop):
    """Await ``work``, which creates or queues a job. Cancelled meanwhile (the client left),
    ``work`` still runs to its end, and then its job is cancelled: cancelling it halfway could
    leave a job queued that no one follows or cancels."""
    running = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(running)
    except asyncio.CancelledError:
        _hold(running).add_done_callback(
            lambda done: done.cancelled() or done.exception() is not None or cancel_soon(job_id_of(done.result()),
                                                                                         stop))
        raise


async def _submit(spec, params, call, request_id, ahead):
    meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
    return await jobs.submit(spec, params.get("arguments") or {}, session_id=stateless_session_id(),
                             request_id=request_id, stream_key=new_stream_key(), user_id=call.session.user_id,
                             principal=call.session.principal, caller=call.caller.key,
                             progress_token=meta.get("progressToken"),
                             context=rows.modern_context(call.session.client_capabilities,
                                                         meta.get("io.modelcontextprotocol/logLevel")),
                             slot=call.quota, ahead=ahead)


async def _resumed(payload):
    job = await jobs.load(payload.get("job"))
    if job is None or not isinstance(payload.get("position"), str):  # (the state is this principal's)
        raise InvalidParams("The call this requestState continues is no longer known; send it again without it.")
    return job, payload["position"]


async def follow(job, position: str, notify):
    """Relay the job's stream after ``position`` until its final event (returns that event's
    message) or a question the client must answer (returns ``(inputRequests, position)``)."""
    async with aclosing(job_streams.events_after(job, position)) as events:
        async for event in events:
            message = event.message
            if event.final:
                return message
            if message is None:
                continue
            if "id" in message and "method" in message:  # the tool asks: the round ends here
                inputs = await following.pending_inputs(job)
                if inputs:
                    return inputs, event.id.position
            elif "method" in message:
                await notify(message["method"], message.get("params") or {})
