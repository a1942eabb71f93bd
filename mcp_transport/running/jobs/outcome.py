"""A job's end: its status, its answer on its stream (written once, whoever writes it), and the
MCP ``Task`` clients see of it."""
from django.utils import timezone

from ... import tracing
from ...state import metrics, quotas
from ...conf import get_config
from ...connections import async_redis, keys
from ...models import McpJob
from ...protocol import jsonrpc
from ...protocol.ids import GET_STREAM
from ...protocol.jsonrpc import notification_message, result_message
from ...storage import get_event_store
from .rows import Status, is_2026_job, transition


async def finish(job, status: str, result=None, error: str = "", allowed=McpJob.ACTIVE, where=None,
                 **fields) -> bool:
    """End the job with ``status`` (and its CallToolResult) unless it already ended (or is no
    longer in one of ``allowed``); True if this call ended it, and then its answer is written."""
    if not await transition(job.id, status, allowed, where=where, result=result, error=error,
                            finished_at=timezone.now(), **fields):
        return False
    job.status, job.result, job.error = status, result, error
    await quotas.release_job(job.id)
    await answer(job)
    tracing.job_ended(job)
    await metrics.record_job(status, (timezone.now() - job.created_at).total_seconds())
    return True


def outcome_status(result: dict) -> str:
    """"For tasks that wrap tool call requests, when the tool result has isError set to true,
    the task should reach failed status." -- spec 2025-11-25 basic/utilities/tasks"""
    return Status.FAILED if result.get("isError") else Status.COMPLETED


def error_text(result: dict) -> str:
    if not result.get("isError"):
        return ""
    texts = [block.get("text", "") for block in result.get("content", []) if block.get("type") == "text"]
    return " ".join(texts)[:2000]


async def answer(job) -> None:
    """Write the ended job's response on its stream (for a task: the end of its stream and a
    status notification), once, whoever calls it."""
    record = keys().call(job.session_id, job.stream_key)
    async with async_redis().pipeline(transaction=False) as pipe:
        pipe.hsetnx(record, "done", job.status)
        pipe.expire(record, get_config()["STREAM_TTL"])
        first, _ = await pipe.execute()
    if not first:
        return
    message = None
    if not job.is_task and job.status != Status.CANCELLED:
        message = result_message(job.request_id, job.result)
        message, _ = quotas.within_event_size(message, jsonrpc.dumps(message))
    await get_event_store().append(job.session_id, job.stream_key, message, final=True)
    await announce(job)


async def announce(job) -> None:
    """``notifications/tasks/status`` on the session's GET stream, for task-augmented jobs:
    "clients SHOULD expect messages to be delivered on any SSE stream, including the HTTP GET
    stream" -- spec 2025-11-25 basic/utilities/tasks"""
    if job.is_task and not is_2026_job(job):  # the 2026 extension has no session stream to put it on
        message = notification_message("notifications/tasks/status", task_view(job))
        await get_event_store().append(job.session_id, GET_STREAM, message)


def task_view(job) -> dict:
    """The MCP ``Task`` of a job (a queued job is ``working`` to clients: tasks begin there)."""
    status = Status.WORKING if job.status == Status.QUEUED else job.status
    view = {"taskId": job.id, "status": str(status), "createdAt": _iso(job.created_at),
            "lastUpdatedAt": _iso(job.updated_at), "ttl": job.ttl_ms,
            "pollInterval": get_config()["TASK_POLL_INTERVAL_MS"]}
    message = _status_message(job)
    if message:
        view["statusMessage"] = message
    return view


#: A queued job's message while it waits for one of its caller's running jobs to end (submitting.defer).
CALLER_BUSY = "Queued: its caller runs {limit} background jobs at once already; it starts when one of them ends."
#: A job that lets other callers' jobs go first (shares.py: "room", "turn"; submitting.defer).
OTHERS_FIRST = "Queued: other callers' jobs go first; it starts in its caller's turn."


def waits_for_caller(job) -> bool:
    """The queued job was looked at and waits for its caller's turn (CALLER_BUSY, OTHERS_FIRST)."""
    message = job.message or ""
    return job.status == Status.QUEUED and (message.startswith(CALLER_BUSY.partition("{")[0])
                                            or message == OTHERS_FIRST)


def _status_message(job):
    if job.status == Status.QUEUED:
        return job.message if waits_for_caller(job) else "Queued: waiting for a worker."
    if job.status in (Status.FAILED, Status.CANCELLED):
        return job.error or None
    return job.message or None


def _iso(moment) -> str:
    return (moment or timezone.now()).isoformat().replace("+00:00", "Z")
