"""The tasks extension of the 2026-07-28 era (``io.modelcontextprotocol/tasks``, SEP-2663), on
the wire, without I/O: negotiation, and the shapes of its results.

What changed from the 2025-11-25 tasks utility (basic/utilities/tasks):

- the server decides: a ``tools/call`` of a task-supporting tool from a client that declares
  the extension (in the request's ``clientCapabilities.extensions``) answers a flat
  ``CreateTaskResult`` (``resultType: "task"``, ``taskId``, ``status``...; no ``task`` wrapper);
  a client that does not declare it gets a plain result, or -32021 for a tool that requires a task;
- ``tasks/get`` inlines the outcome (``result``, ``error`` or ``inputRequests``); there is no
  ``tasks/result`` and no ``tasks/list`` (-32601); ``tasks/update`` carries ``inputResponses``;
- ``ttlMs`` and ``pollIntervalMs`` (integers) replace ``ttl`` and ``pollInterval``;
- a tool that ran and reported an error is ``completed`` with ``result.isError``; ``failed`` is
  for protocol-level errors, with an inlined JSON-RPC ``error`` and no ``result``;
- ``tasks/cancel`` and ``tasks/update`` answer an empty ``{resultType: "complete"}`` ack, and a
  cancel of a task that already ended gets the same ack.
"""
from typing import Optional

from .errors import InvalidParams
from .extensions import client_declares

EXTENSION = "io.modelcontextprotocol/tasks"
#: The methods of the extension (Mcp-Name carries their taskId).
METHODS = ("tasks/get", "tasks/update", "tasks/cancel")
TERMINAL = ("completed", "failed", "cancelled")
MISSING_CLIENT_CAPABILITY = -32021


def declared(client_capabilities) -> bool:
    """Whether the request's clientCapabilities declare the extension (it is per request:
    "A session that did not declare the extension ... can opt into task creation for a single
    tools/call")."""
    return client_declares(client_capabilities, EXTENSION)


def required_capabilities() -> dict:
    """``data`` of the -32021 error: "a requiredCapabilities object whose shape mirrors
    InitializeRequest.capabilities"."""
    return {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}


def task_id(params: dict) -> str:
    value = params.get("taskId")
    if not isinstance(value, str) or not value:
        raise InvalidParams('"taskId" must be a non-empty string.')
    return value


def not_found() -> InvalidParams:
    """"tasks/get for a taskId the server doesn't recognize MUST return -32602"."""
    return InvalidParams("Task not found: the taskId is unknown or its ttl has passed.")


def ack() -> dict:
    """The answer of tasks/cancel and tasks/update: "an empty {resultType:"complete"} ack"."""
    return {"resultType": "complete"}


def wire_status(status: str, failed_internally: bool) -> str:
    """A job's status as a task of this extension shows it: a queued job is ``working``
    (tasks begin there), and a job that failed because its tool reported an error is
    ``completed`` (its result has ``isError``)."""
    if status == "queued":
        return "working"
    if status == "failed" and not failed_internally:
        return "completed"
    return status


def task(task_id_value: str, status: str, created_at: str, updated_at: str, ttl_ms: Optional[int],
         poll_interval_ms: int, message: Optional[str] = None) -> dict:
    """The ``Task`` fields, flat: ``ttlMs`` (null: unlimited) and ``pollIntervalMs``, integers."""
    view = {"taskId": task_id_value, "status": status, "createdAt": created_at, "lastUpdatedAt": updated_at,
            "ttlMs": int(ttl_ms) if ttl_ms is not None else None, "pollIntervalMs": int(poll_interval_ms)}
    if message:
        view["statusMessage"] = message
    return view


def create_task_result(view: dict) -> dict:
    """"a flat Result & Task intersection: resultType:"task", plus taskId / status ..."."""
    return {"resultType": "task", **view}


def detailed_task(view: dict, result=None, error=None, input_requests=None) -> dict:
    """tasks/get: the task, with its outcome inlined by status. "Completed tasks MUST inline the
    original tool result under result"; a failed one "an inlined error object ... and MUST NOT
    carry result"; an input_required one "a non-empty inputRequests map"."""
    detailed = {"resultType": "complete", **view}
    status = view["status"]
    if status == "completed" and result is not None:
        detailed["result"] = inlined_result(result)
    elif status == "failed":
        detailed["error"] = error or {"code": -32603, "message": "The task failed."}
    elif status == "input_required" and input_requests:
        detailed["inputRequests"] = input_requests
    return detailed


def inlined_result(result: dict) -> dict:
    """A completed task's ``result``: "The structure matches the result type of the original
    request ... a CallToolRequest task would return the CallToolResult structure", which in this
    era carries ``resultType: "complete"`` ("resultType is required on every result"; the
    official client library refuses a result without it). The job keeps the tool's result as
    its tool returned it, shared with the 2025-11-25 tasks utility, so the era stamps it here."""
    return {**strip_related_task(result), "resultType": "complete"}


def strip_related_task(result: dict) -> dict:
    """"The v1 io.modelcontextprotocol/related-task _meta key MUST NOT appear on tasks/get's
    inlined result"."""
    meta = result.get("_meta")
    if not isinstance(meta, dict) or "io.modelcontextprotocol/related-task" not in meta:
        return result
    meta = {key: value for key, value in meta.items() if key != "io.modelcontextprotocol/related-task"}
    stripped = {key: value for key, value in result.items() if key != "_meta"}
    if meta:
        stripped["_meta"] = meta
    return stripped
