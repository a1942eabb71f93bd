"""The tasks extension of the 2026-07-28 era (``io.modelcontextprotocol/tasks``) over the
background jobs of running/jobs/: the same ``McpJob`` rows, Celery worker and event store as the
2025-11-25 tasks utility (eras/legacy_2025/tasks.py); the wire is protocol/tasks_extension.py.

A modern client that declares the extension and calls a background tool gets a
``CreateTaskResult`` once the job's row is written ("A server MUST NOT return CreateTaskResult
until the task is durably created"), and polls ``tasks/get`` on any web process, across web
restarts, until the job ends; the outcome stays readable for the task's ttl. A question the tool
asks (``ctx.elicit``...) turns the task ``input_required`` with the question in
``inputRequests``; ``tasks/update`` hands the answer to the worker.

Modern tasks have no session: they are bound to the principal that created them (auth.Principal's
key; nobody's when authorization is off) and to knowing the taskId (192 random bits).
"""
import secrets

from django.utils import timezone

from ...running import jobs
from ...running.jobs import following, rows
from ...conf import get_config
from ...protocol import mrtr, task_streams, tasks_extension
from ...protocol.errors import ProtocolError
from ...protocol.ids import new_stream_key
from ...methods.registry import ArgumentError, registry
from ...methods.specs import MethodTable

Status = jobs.Status


def missing_extension(what: str) -> ProtocolError:
    """"the server MUST return an error with the code -32021 (Missing Required Client
    Capability), indicating the required extension in the error response"."""
    return ProtocolError(f"{what} needs the {tasks_extension.EXTENSION} extension in the request's clientCapabilities.",
                         code=tasks_extension.MISSING_CLIENT_CAPABILITY, http_status=400,
                         data=tasks_extension.required_capabilities())


def offer():
    """The extension's entry in server/discover's ``capabilities.extensions`` (methods/extensions.py):
    declared while some tool can run as a task. Exactly ``{}``: "No extension-specific settings
    are currently defined; an empty object indicates support", and the official client library
    (@modelcontextprotocol/ext-tasks, what the Inspector builds on) takes any key in it for "no
    tasks". So ``tasks/stream`` (TASK_STREAMS) is not announced here: SEP-2694's "MAY advertise
    this support as an eventStreams sub-capability of Tasks" would turn tasks off for that
    library; a client that wants streams calls the method (-32601 while the setting is off)."""
    return {} if any(spec.task_support for spec in registry.tools.values()) else None


def stateless_session_id() -> str:
    """The event-store namespace of one modern call's job (no session owns it)."""
    return f"stateless-{secrets.token_hex(8)}"


# -- tools/call -------------------------------------------------------------------------------

async def start(spec, params: dict, call, request_id):
    """A ``CreateTaskResult`` when the tool supports tasks and the request declares the
    extension; -32021 for a tool that requires a task when it does not; None when the call
    runs as a plain one (no task support, no extension, or arguments the tool refuses, whose
    error result the plain call gives)."""
    if not spec.task_support:
        return None  # "MUST NOT promote a sync-only tool to a task", whatever ``task`` says
    if not tasks_extension.declared(call.session.client_capabilities):
        if spec.task_support == "required":
            raise missing_extension(f"Tool {spec.name}")
        return None
    arguments = params.get("arguments") if isinstance(params.get("arguments"), dict) else {}
    try:
        spec.bind(arguments)
    except ArgumentError:
        return None
    meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
    return await submit(spec, arguments, call, request_id, meta, ahead=mrtr.input_responses(params))


async def submit(spec, arguments: dict, call, request_id, meta: dict, ahead=None) -> dict:
    """Create the task's job and queue it; its CreateTaskResult (``ahead``: the answers the
    call gave before anything was asked, for the questions that take them: jobs.submit)."""
    job = await jobs.submit(spec, arguments, session_id=stateless_session_id(), request_id=request_id,
                            stream_key=new_stream_key(), user_id=call.session.user_id,
                            principal=call.session.principal, caller=call.caller.key,
                            progress_token=meta.get("progressToken"), is_task=True,
                            ttl_ms=get_config()["TASK_DEFAULT_TTL_MS"],
                            context=rows.modern_context(call.session.client_capabilities,
                                                        meta.get("io.modelcontextprotocol/logLevel")),
                            slot=call.quota, opening=stream_opening(), ahead=ahead)
    job = await jobs.load(job.id)  # its timestamps, as the database keeps them
    return tasks_extension.create_task_result(view(job))


def stream_opening():
    """What a task's job stream starts with while TASK_STREAMS is on: its ``working`` status,
    event 0 of its tasks/stream (task_streams.py)."""
    return task_streams.opening if get_config()["TASK_STREAMS"] else None


def view(job) -> dict:
    status = tasks_extension.wire_status(job.status, rows.failed_internally(job))
    message = "Queued: waiting for a worker." if job.status == Status.QUEUED else (job.error or job.message)
    return tasks_extension.task(job.id, status, _iso(job.created_at), _iso(job.updated_at), job.ttl_ms,
                                get_config()["TASK_POLL_INTERVAL_MS"], message)


def _iso(moment) -> str:
    return (moment or timezone.now()).isoformat().replace("+00:00", "Z")


# -- tasks/* ------------------------------------------------------------------------------------

async def owned(params, call):
    """The task named by ``taskId`` if this request may see it: -32021 without the extension,
    -32602 for an unknown, foreign or expired one."""
    if not tasks_extension.declared(call.session.client_capabilities):
        raise missing_extension("This method")
    job = await jobs.load_task(tasks_extension.task_id(params), call.session.principal, modern=True, by=call)
    if job is None or rows.task_expired(job):
        raise tasks_extension.not_found()
    return job


async def tasks_get(params, call):
    job = await jobs.current(await owned(params, call), by=call)
    task = view(job)
    error = None
    if task["status"] == "failed":
        error = {"code": -32603, "message": job.error or "The task failed."}
    inputs = await following.pending_inputs(job) if task["status"] == "input_required" else None
    return tasks_extension.detailed_task(task, result=job.result, error=error, input_requests=inputs)


async def tasks_update(params, call):
    """"The client delivers responses through tasks/update with inputResponses keyed to match
    the server-emitted ids. The server MUST return an empty {resultType:"complete"} ack".

    Only answers to the task's own pending questions (the job's inputRequests, which the server
    keeps) reach its tool as their answers; any other key is kept only as an answer given ahead,
    for a question the tool declares ``answerable_ahead`` (following.deliver_inputs), and the task stays
    ``input_required`` until its questions are answered."""
    job = await owned(params, call)
    responses = mrtr.input_responses(params)
    # Its record is the audit trail's only when an answer reached the tool (running/audit.py).
    call.changed = not job.is_terminal and bool(await following.deliver_inputs(job, responses))
    return tasks_extension.ack()


async def tasks_cancel(params, call):
    """"tasks/cancel against a terminal task returns the same empty ack (idempotent)"."""
    job = await owned(params, call)
    # This call's record is the stop's (running/audit.py): it changed something if it ended the job.
    call.changed = not job.is_terminal and await jobs.acancel(job.id, "The task was cancelled by request.")
    return tasks_extension.ack()


METHODS = MethodTable()
#: The extension's methods: served while it is declared (``offer``); "Mcp-Name ... taskId".
METHODS.method("tasks/get", capability=tasks_extension.EXTENSION, target="taskId")(tasks_get)
METHODS.method("tasks/update", capability=tasks_extension.EXTENSION, target="taskId")(tasks_update)
METHODS.method("tasks/cancel", capability=tasks_extension.EXTENSION, target="taskId")(tasks_cancel)
