"""MCP tasks (spec 2025-11-25 basic/utilities/tasks) over background jobs.

A task-augmented ``tools/call`` of a background tool creates a job (running/jobs/) and answers
at once with a ``CreateTaskResult``; the job's id is the ``taskId``. ``tasks/get`` and
``tasks/list`` read the job rows, ``tasks/cancel`` cancels the job, and ``tasks/result`` waits
for the job to end (forwarding the requests the tool sends to the client meanwhile, such as an
elicitation) and returns exactly what the call would have returned.

Tasks are bound to the session that created them: another session's task ids are "not found".
"""
import json
from contextlib import aclosing

from django.conf import settings

from ...running import jobs, streams
from ...running.jobs import outcome, rows, settling
from ...state.bell import doorbell
from ...conf import get_config
from ...connections import async_redis, keys
from ...methods.invoke import run_sync_or_async
from ...methods.specs import MethodTable, always
from ...models import McpJob
from ...protocol import list_cursors
from ...protocol.errors import ErrorCode, InvalidParams, ProtocolError
from ...protocol.ids import new_stream_key
from ...storage import get_event_store

Status = jobs.Status


def capability() -> dict:
    return {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}


def granted_ttl(task_params) -> int:
    """"Receivers MAY override the requested ttl duration": the request's, capped at TASK_MAX_TTL_MS."""
    config = get_config()
    requested = task_params.get("ttl") if isinstance(task_params, dict) else None
    if not isinstance(requested, int) or isinstance(requested, bool) or requested <= 0:
        requested = config["TASK_DEFAULT_TTL_MS"]
    cap = config["TASK_MAX_TTL_MS"]
    return requested if cap is None else min(requested, cap)


async def create(spec, arguments, params, call) -> dict:
    meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
    job = await jobs.submit(spec, arguments, session_id=call.session.id, request_id=call.channel.request_id,
                            stream_key=new_stream_key(), user_id=call.session.user_id,
                            principal=call.session.principal,
                            progress_token=meta.get("progressToken"), is_task=True,
                            ttl_ms=granted_ttl(params.get("task")), slot=call.quota)
    job = await jobs.load(job.id)  # its timestamps, as the database keeps them
    return {"task": outcome.task_view(job)}


async def owned(params, call) -> McpJob:
    """The session's task named by ``taskId``, or -32602 ("Invalid or nonexistent taskId")."""
    job = await jobs.load_task(params.get("taskId"), call.session.principal, session_id=call.session.id, by=call)
    if job is None:
        raise InvalidParams("Failed to retrieve task: Task not found.")
    if rows.task_expired(job):
        raise InvalidParams("Failed to retrieve task: Task has expired.")
    return job


async def tasks_get(params, call):
    job = await jobs.current(await owned(params, call), by=call)
    return outcome.task_view(job)


async def tasks_cancel(params, call):
    job = await owned(params, call)
    if not job.is_terminal:
        # This call's record is the stop's (running/audit.py): it changed something if it ended the job.
        call.changed = await jobs.acancel(job.id, "The task was cancelled by request.")
        job = await jobs.load(job.id)
        if job.status == Status.CANCELLED:  # else it ended on its own meanwhile
            return outcome.task_view(job)
    # "Receivers MUST reject cancellation requests for tasks already in a terminal status"
    raise InvalidParams(f"Cannot cancel task: already in terminal status '{job.status}'.")


def _page(session_id, after, size):
    tasks = McpJob.objects.filter(session_id=session_id, is_task=True).order_by("-created_at", "-id")
    if after is not None:
        created, job_id = after
        tasks = tasks.filter(created_at__lte=created).exclude(created_at=created, id__gte=job_id)
    return list(tasks[:size + 1])


def _cursor(job) -> str:
    return list_cursors.issue([job.created_at.isoformat(), job.id])


def _position(value) -> tuple:
    """A tasks/list cursor's value: the (created_at, id) of the last task of the page before."""
    created, job_id = list_cursors.items(value, 2)
    if not rows.is_job_id(job_id):  # a NUL, say, which the database would refuse in a query
        raise list_cursors.Malformed("not a job id")
    return list_cursors.moment(created, aware=settings.USE_TZ), job_id


async def tasks_list(params, call):
    size = get_config()["PAGE_SIZE"]
    cursor = params.get("cursor")
    after = None if cursor is None else list_cursors.read(cursor, _position)
    # In the caller's share of the handler threads, as tasks/get's reads (jobs.load).
    found = await run_sync_or_async(_page, (call.session.id, after, size), call=call)
    page = {"tasks": [outcome.task_view(job) for job in found[:size] if not rows.task_expired(job)]}
    if len(found) > size:
        page["nextCursor"] = _cursor(found[size - 1])
    return page


async def tasks_result(params, call):
    """"it MUST block the response until the task reaches a terminal status"; meanwhile the
    requests the tool sends (input_required) go out on this response's stream."""
    job = await owned(params, call)
    if not job.is_terminal:
        job = await _follow(job, call.channel)
    meta = rows.related_task_meta(job)
    if job.status == Status.CANCELLED:
        # A cancelled call has no response of its own; tasks/result still needs one.
        raise ProtocolError("The task was cancelled before it finished.", code=ErrorCode.INTERNAL_ERROR,
                            data={"_meta": meta, "taskId": job.id})
    result = dict(job.result or {})
    result["_meta"] = {**result.get("_meta", {}), **meta}
    return result


async def _follow(job, channel):
    """Forward the job's new requests and notifications until it ends; returns the ended row.
    What it asked before is in its pending requests, not in what its stream held already."""
    store, session_id, stream_key = get_event_store(), job.session_id, job.stream_key
    quiet = min(get_config()["KEEPALIVE_SECONDS"], get_config()["HEARTBEAT_SECONDS"])

    async def on_quiet():
        await settling.watch_job(job)  # a job whose worker died is answered (settling.watch)
        return True

    async with doorbell().listen(keys().stream_bell(session_id, stream_key)) as bell:
        events = await store.read_after(session_id, stream_key, "0-0")
        if any(event.final for event in events):
            return await jobs.load(job.id)
        position = events[-1].id.position if events else "0-0"
        pending = await async_redis().hgetall(rows.pending_request_key(job))
        for request_id in sorted(pending, key=int):  # in the order they were asked
            await channel.emit(json.loads(pending[request_id]))
        async with aclosing(streams.tail(session_id, stream_key, position, bell, quiet, on_quiet)) as followed:
            async for event in followed:
                if event.message is not None and not event.final:
                    await channel.emit(event.message)
    return await jobs.load(job.id)


METHODS = MethodTable()
#: The tasks utility's methods (dispatch.serve_tasks serves them). tasks/result waits for the
#: task (a call's place) and relays what it asks the client on its stream.
METHODS.method("tasks/get", capability="tasks")(tasks_get)
METHODS.method("tasks/list", capability="tasks")(tasks_list)
METHODS.method("tasks/cancel", capability="tasks")(tasks_cancel)
METHODS.method("tasks/result", capability="tasks", counts_as_call=True, may_send=always)(tasks_result)

