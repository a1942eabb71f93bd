"""Resumable task event streams (SEP-2694, a draft over the 2026-07-28 tasks extension), on the
wire, without I/O: ``tasks/stream {taskId, after?}`` and the ``notifications/tasks/event`` it
sends, and what a task's stream in the event store says as those events.

"Each task event has a task-scoped sequence number, task ID, event type, and JSON payload."
Our events are the entries of the task's job stream (the stream a worker appends what its tool
sends to), numbered from the task's first one: the ``opening`` the server stores when it creates
the task. The type of each is ours, so vendor-prefixed ("Implementation-defined event types MUST
use a vendor-specific prefix"):

- ``django-mcp-transport.status``: the task's status, ``{"status", "statusMessage"?}``; the
  first event (``working``) and the last (``completed``, ``failed`` or ``cancelled``);
- ``django-mcp-transport.notification``: a notification its tool sent, ``{"method", "params"}``
  (``notifications/progress``, ``notifications/message``, ...);
- ``django-mcp-transport.input_request``: a question its tool asked, ``{"inputRequests": {key:
  {"method", "params"}}}``, the entry tasks/get shows and ``tasks/update`` answers by its key.
"""
from typing import Optional

from .errors import InvalidParams, ProtocolError
from .jsonrpc import notification_message

METHOD = "tasks/stream"
EVENT = "notifications/tasks/event"
RELATED_TASK = "io.modelcontextprotocol/related-task"
#: "the implementation-defined server error range": a cursor older than what is kept.
EVENTS_GONE = -32010
#: Our namespace: the distribution's name, which we control.
VENDOR = "django-mcp-transport"
STATUS, NOTIFICATION, INPUT_REQUEST = f"{VENDOR}.status", f"{VENDOR}.notification", f"{VENDOR}.input_request"
TYPES = (STATUS, NOTIFICATION, INPUT_REQUEST)
#: What the server stores first on a task's job stream: its ``working`` status, and the sign
#: that the stream still holds the task's first event (the numbering starts there).
OPENING_METHOD = "notifications/tasks/status"
#: Where the stored copy of a question keeps its inputRequests key (the worker writes it).
INPUT_KEY = f"{VENDOR}/inputKey"


def after(params: dict) -> Optional[int]:
    """The exclusive resume cursor, or None. "Receivers MUST return -32602 (Invalid params) if
    after is negative, not an integer, or otherwise not a valid sequence number value"."""
    if "after" not in params or params["after"] is None:
        return None
    value = params["after"]
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidParams('"after" must be a non-negative integer: the seq of the last task event processed.')
    return value


def past_the_end(value: int, last: int) -> InvalidParams:
    """A cursor no event of the task has had yet is "not a valid sequence number value"."""
    if last < 0:
        return InvalidParams(f'"after" is {value}, but this task has sent no event yet; leave "after" out.')
    return InvalidParams(f'"after" is {value}, but this task\'s last event so far is {last}.')


def events_gone(task_id: str) -> ProtocolError:
    """"When a cursor is too old to resume, receivers return a JSON-RPC error using the
    implementation-defined server error range". Ours are gone from their first on: the count
    that numbers them is gone with it, so there is no ``earliestSeq`` to offer."""
    return ProtocolError("Task events are no longer available: they are past this server's retention.",
                         code=EVENTS_GONE, http_status=200, data={"reason": "events_gone", "taskId": task_id})


def opening(task_id: str) -> dict:
    return notification_message(OPENING_METHOD, {"taskId": task_id, "status": "working"})


def is_opening(message) -> bool:
    return isinstance(message, dict) and message.get("method") == OPENING_METHOD and "id" not in message


def with_input_key(params, key: str) -> dict:
    """A question's params as its job stream keeps them: with the inputRequests key it has."""
    params = dict(params or {})
    params["_meta"] = {**(params.get("_meta") or {}), INPUT_KEY: key}
    return params


def event_of(message, final: bool, end: Optional[dict] = None):
    """(type, payload) of one entry of a task's job stream, or None for an entry that is no task
    event (a response: a task's answer is its status). ``end`` is the task's status at its final
    entry (``{"status", "statusMessage"?}``): the stored final entry holds none."""
    if final:
        return STATUS, dict(end or {})
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        return None
    params = message.get("params") if isinstance(message.get("params"), dict) else {}
    if "id" in message:
        meta = dict(params.get("_meta") or {})
        key = meta.pop(INPUT_KEY, None)
        asked = {name: value for name, value in params.items() if name != "_meta"}
        if meta:
            asked["_meta"] = meta
        return INPUT_REQUEST, {"inputRequests": {str(key or message["id"]): {"method": message["method"],
                                                                               "params": asked}}}
    if is_opening(message):
        return STATUS, {"status": params.get("status", "working")}
    return NOTIFICATION, {"method": message["method"], "params": params}


def event(task_id: str, seq: int, kind: str, payload: dict) -> dict:
    """A ``notifications/tasks/event`` message. "Receivers MUST include
    io.modelcontextprotocol/related-task metadata on task event notifications. The metadata task
    ID MUST match params.taskId"."""
    return notification_message(EVENT, {"seq": seq, "taskId": task_id, "type": kind, "payload": payload,
                                        "_meta": {RELATED_TASK: {"taskId": task_id}}})
