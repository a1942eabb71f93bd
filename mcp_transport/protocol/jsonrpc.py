"""JSON-RPC 2.0 messages as MCP restricts them: parsing one message, building replies.

"The body of the POST request MUST be a single JSON-RPC request, notification, or response."
-- spec 2025-11-25 basic/transports (batches were removed in 2025-06-18).
"""
import json
import math
import re
from dataclasses import dataclass
from typing import Any, Union

from . import bounds as shape
from .errors import ErrorCode, InvalidParams, InvalidRequest, ParseError

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


#: Integer ids (and progress tokens) a request may have: what a signed or unsigned 64-bit integer
#: holds. Beyond that (JSON allows any) the answer is 400, not a failure wherever it is stored.
MIN_INTEGER_ID, MAX_INTEGER_ID = -2 ** 63, 2 ** 64 - 1
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def parse(body: bytes, bounds: shape.Bounds = shape.DEFAULT) -> Message:
    """Parse one POST body. Raises only ParseError, InvalidRequest, or InvalidParams (HTTP 400)
    for a message nesting deeper than ``bounds`` allow (``protocol/bounds.py``).

    Two kinds of JSON text are refused as not JSON this server can carry (-32700): a number
    outside the doubles (``1e999``: it would come back as ``Infinity``, which is not JSON), and
    a ``\uD800``-style escape of a lone surrogate, which is no Unicode character: "JSON-RPC
    messages MUST be UTF-8 encoded" -- spec 2025-11-25 basic/transports, and UTF-8 cannot
    encode it (RFC 8259 section 8.2 leaves its meaning "unpredictable")."""
    try:
        text = body.decode("utf-8")
        obj = _DECODER.decode(text)
    except _NotFinite as exc:
        raise ParseError(str(exc)) from None
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ParseError("The request body is not valid UTF-8 JSON.") from None
    if "\\u" in text and _has_lone_surrogate(obj):  # only an escape can make one
        raise ParseError("The request body escapes a lone surrogate (such as \\ud800), which is not a "
                         "Unicode character: it cannot be UTF-8.")
    if isinstance(obj, list):
        raise InvalidRequest("Batches are not supported: send one JSON-RPC message per POST.")
    if not isinstance(obj, dict):
        raise InvalidRequest("The request body must be a JSON-RPC object.")
    if obj.get("jsonrpc") != "2.0":
        raise InvalidRequest('The "jsonrpc" member must be exactly "2.0".')
    shape.check_depth(obj, text, bounds.max_depth)
    message = _parse_call(obj) if "method" in obj else _parse_response(obj)
    _check_ids(message, bounds.max_id_bytes)
    return message


def _check_ids(message, max_id_bytes):
    if not isinstance(message, Notification):
        shape.check_id(message.id, "A request id", max_id_bytes)
    meta = getattr(message, "params", None) and message.params.get("_meta")
    if isinstance(meta, dict):
        shape.check_id(meta.get("progressToken"), "A progressToken", max_id_bytes)


def _reject_constant(name):
    # Python's json accepts NaN, Infinity and -Infinity, which are not JSON (RFC 8259).
    raise ValueError(f"{name} is not valid JSON.")


class _NotFinite(ValueError):
    pass


def _finite_float(text):
    value = float(text)
    if not math.isfinite(value):
        raise _NotFinite(f"The number {text[:40]} is beyond the range of JSON numbers this server can carry "
                         "(64-bit floating point).")
    return value


def _has_lone_surrogate(obj) -> bool:
    """Any string (key or value) holding a lone surrogate; iterative, so depth costs no stack."""
    pending = [obj]
    while pending:
        value = pending.pop()
        if isinstance(value, str):
            if _LONE_SURROGATE.search(value):
                return True
        elif isinstance(value, dict):
            pending.extend(value.keys())
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
    return False


def _is_request_id(value):
    # "Requests MUST include a string or integer ID ... the ID MUST NOT be null."
    # -- spec 2025-11-25 basic/index. bool is an int subclass in Python; reject it too.
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)
                                      and MIN_INTEGER_ID <= value <= MAX_INTEGER_ID)


def progress_token(params: dict):
    """The request's ``_meta.progressToken``, or None; -32602 when it is not one.

    "type ProgressToken = string | number" in the schema, and "The progress token MUST be a
    string or integer value" -- spec 2025-11-25 basic/utilities/progress."""
    meta = params.get("_meta")
    if meta is None:
        return None
    if not isinstance(meta, dict):
        raise InvalidParams('"_meta" must be an object.')
    token = meta.get("progressToken")
    if token is not None and not _is_request_id(token):
        raise InvalidParams("A progressToken must be a string or an integer (64-bit).")
    return token


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
        raise InvalidRequest("A request id must be a string or a 64-bit integer, never null.")
    return Request(id=obj["id"], method=method, params=params)


def _parse_response(obj):
    if not _is_request_id(obj.get("id")):
        raise InvalidRequest("A message without a method must be a response with a string or 64-bit integer id.")
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


# Made once: json.loads and json.dumps with any option build a new decoder or encoder per call.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def dumps(message: Any) -> bytes:
    """Compact UTF-8 JSON: never contains a raw newline, so it fits one SSE data line, and
    never ``NaN`` or ``Infinity`` (not JSON: a tool's non-finite float goes out as null, as
    JavaScript's ``JSON.stringify`` writes it)."""
    try:
        text = _ENCODER.encode(message)
    except ValueError:
        text = json.dumps(without_non_finite(message), ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (a tool's string; parse() refuses them from clients) cannot be
        # UTF-8; escaped as \uXXXX it is still valid JSON.
        return json.dumps(without_non_finite(message), ensure_ascii=True, separators=(",", ":")).encode("ascii")


def without_non_finite(value):
    """``value`` with every NaN and infinity replaced by None (JSON has no such numbers)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: without_non_finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [without_non_finite(item) for item in value]
    return value


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
    "error_message", "notification_message", "parse", "progress_token", "without_non_finite",
    "request_message", "result_message", "within_size",
]
