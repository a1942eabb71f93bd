"""JSON-RPC 2.0 messages as MCP restricts them: parsing one message, building replies.

"The body of the POST request MUST be a single JSON-RPC request, notification, or response."
-- spec 2025-11-25 basic/transports (batches were removed in 2025-06-18).
"""
import json
from dataclasses import dataclass
from typing import Any, Union

from .errors import ErrorCode, InvalidRequest, ParseError

RequestId = Union[str, int]


@dataclass(frozen=True, kw_only=True)
class Request:
    id: RequestId
    method: str
    params: dict


@dataclass(frozen=True, kw_only=True)
class Notification:
    method: str
    params: dict


@dataclass(frozen=True, kw_only=True)
class Response:
    """A client's answer to one of our requests (sampling, elicitation, roots, ping)."""

    id: RequestId
    result: Any = None
    error: Any = None

    @property
    def is_error(self):
        return self.error is not None


Message = Union[Request, Notification, Response]


def parse(body: bytes) -> Message:
    """Parse one POST body. Raises only ParseError or InvalidRequest."""
    try:
        obj = json.loads(body.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ParseError("The request body is not valid UTF-8 JSON.") from None
    if isinstance(obj, list):
        raise InvalidRequest("Batches are not supported: send one JSON-RPC message per POST.")
    if not isinstance(obj, dict):
        raise InvalidRequest("The request body must be a JSON-RPC object.")
    if obj.get("jsonrpc") != "2.0":
        raise InvalidRequest('The "jsonrpc" member must be exactly "2.0".')
    if "method" in obj:
        return _parse_call(obj)
    return _parse_response(obj)


def _reject_constant(name):
    # Python's json accepts NaN, Infinity and -Infinity, which are not JSON (RFC 8259).
    raise ValueError(f"{name} is not valid JSON.")


def _is_request_id(value):
    # "Requests MUST include a string or integer ID ... the ID MUST NOT be null."
    # -- spec 2025-11-25 basic/index. bool is an int subclass in Python; reject it too.
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _parse_call(obj):
    method, params = obj["method"], obj.get("params", {})
    if not isinstance(method, str) or not method:
        raise InvalidRequest('The "method" member must be a non-empty string.')
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise InvalidRequest('The "params" member must be an object.')
    if "id" not in obj:
        return Notification(method=method, params=params)
    if not _is_request_id(obj["id"]):
        raise InvalidRequest("A request id must be a string or an integer, never null.")
    return Request(id=obj["id"], method=method, params=params)


def _parse_response(obj):
    if not _is_request_id(obj.get("id")):
        raise InvalidRequest("A message without a method must be a response with a valid id.")
    has_result, has_error = "result" in obj, "error" in obj
    if has_result == has_error:
        raise InvalidRequest("A response must carry exactly one of result and error.")
    if has_error and not _is_error_object(obj["error"]):
        raise InvalidRequest("A response error must be an object with an integer code.")
    return Response(id=obj["id"], result=obj.get("result"), error=obj.get("error"))


def _is_error_object(error):
    code = isinstance(error, dict) and error.get("code")
    return isinstance(code, int) and not isinstance(code, bool)


def result_message(request_id: RequestId, result: Any) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_message(request_id, code: int, message: str, data: Any = None) -> dict:
    """An error response; ``request_id=None`` omits the id (the id could not be read).

    The schema's ``JSONRPCErrorResponse.id`` is optional and ``RequestId`` excludes null, and
    "The HTTP response body MAY comprise a JSON-RPC error response that has no id."
    -- spec 2025-11-25 basic/transports.
    """
    error = {"code": int(code), "message": message}
    if data is not None:
        error["data"] = data
    msg = {"jsonrpc": "2.0", "error": error}
    if request_id is not None:
        msg["id"] = request_id
    return msg


def request_message(request_id: RequestId, method: str, params: Any = None) -> dict:
    msg = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def notification_message(method: str, params: Any = None) -> dict:
    msg = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def dumps(message: Any) -> bytes:
    """Compact UTF-8 JSON: never contains a raw newline, so it fits one SSE data line."""
    try:
        return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (a client can send "\ud800" in an id or params) cannot be UTF-8;
        # escaped as \uXXXX it is still valid JSON.
        return json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def within_size(message: Any, data: bytes, limit: int):
    """``(message, data)`` to store and send in place of an encoded message of ``len(data)``
    bytes, when that is over ``limit`` (MAX_EVENT_BYTES): a response becomes an error with the
    same id (a tool result, an ``isError`` result, as for any other tool failure); anything else
    (a notification, a request to the client) becomes ``(None, b"")``: dropped. ``message`` as
    it is when it fits."""
    if len(data) <= limit or not isinstance(message, dict):
        return message, data
    text = f"The response is {len(data)} bytes, over this server's limit of {limit} bytes per message."
    if "id" not in message or "method" in message:
        return None, b""
    result = message.get("result")
    if isinstance(result, dict) and isinstance(result.get("content"), list):
        replaced = result_message(message["id"], {"content": [{"type": "text", "text": text}], "isError": True})
    else:
        replaced = error_message(message["id"], ErrorCode.INTERNAL_ERROR, text)
    return replaced, dumps(replaced)


__all__ = [
    "ErrorCode", "Message", "Notification", "Request", "RequestId", "Response", "dumps",
    "error_message", "notification_message", "parse",
    "request_message", "result_message", "within_size",
]
