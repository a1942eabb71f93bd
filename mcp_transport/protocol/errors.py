"""Errors of the protocol core, each carrying its JSON-RPC code and HTTP status.

Tree::

    ProtocolError                  code, http_status, message, data
    ├── RemoteProtocolError        the client broke the protocol (400-class)
    │   ├── ParseError             -32700, HTTP 400
    │   ├── InvalidRequest         -32600, HTTP 400
    │   ├── MethodNotFound         -32601, in-band (HTTP 200)
    │   ├── InvalidParams          -32602, in-band (HTTP 200)
    │   └── TransportError         -32600, HTTP 403/404/405/406/409/413/415/400
    │       └── LimitReached       -32600, HTTP 429 with Retry-After
    ├── ServerStopping             -32000: the process is being stopped (503, or in-band)
    └── LocalProtocolError         we broke it: a bug (-32603)

Parsing client input raises nothing but ``RemoteProtocolError`` (the h11 fuzz invariant);
anything else escaping the core is a bug. The shell maps these to responses in one place.
"""
import math
from enum import IntEnum


class ErrorCode(IntEnum):
    #: Invalid JSON was received.
    PARSE_ERROR = -32700
    #: The JSON sent is not a valid request object.
    INVALID_REQUEST = -32600
    #: The method does not exist or is not available.
    METHOD_NOT_FOUND = -32601
    #: Invalid method parameters (unknown tool, bad cursor, bad log level).
    INVALID_PARAMS = -32602
    #: Internal JSON-RPC error.
    INTERNAL_ERROR = -32603
    #: Resource not found (spec 2025-11-25 server/resources).
    RESOURCE_NOT_FOUND = -32002
    #: The server process is being stopped (a deploy): the request was not run, or not finished.
    #: JSON-RPC's range for "implementation-defined server-errors"; 2026-07-28 keeps
    #: -32000..-32019 for those ("legacy and implementation-defined") and -32020.. for the spec.
    SERVER_STOPPING = -32000


class ProtocolError(Exception):
    code = ErrorCode.INTERNAL_ERROR
    #: HTTP status of the reply; 200 means the error goes in-band as a JSON-RPC error.
    http_status = 500

    def __init__(self, message, *, code=None, http_status=None, data=None, headers=()):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if http_status is not None:
            self.http_status = http_status
        self.data = data
        #: Extra response headers as (name, value) str pairs, e.g. ``Allow`` for a 405.
        self.headers = tuple(headers)

    def asgi_headers(self) -> list:
        """The extra headers as an ASGI response carries them: (name, value) bytes pairs."""
        return [(name.encode(), value.encode()) for name, value in self.headers]


class RemoteProtocolError(ProtocolError):
    """The client sent something the protocol does not allow."""

    code = ErrorCode.INVALID_REQUEST
    http_status = 400


class LocalProtocolError(ProtocolError):
    """We tried to do something the protocol does not allow: a bug."""


class ParseError(RemoteProtocolError):
    code = ErrorCode.PARSE_ERROR


class InvalidRequest(RemoteProtocolError):
    code = ErrorCode.INVALID_REQUEST


class MethodNotFound(RemoteProtocolError):
    code = ErrorCode.METHOD_NOT_FOUND
    http_status = 200


class InvalidParams(RemoteProtocolError):
    code = ErrorCode.INVALID_PARAMS
    http_status = 200


class ResourceNotFound(RemoteProtocolError):
    code = ErrorCode.RESOURCE_NOT_FOUND
    http_status = 200


class TransportError(RemoteProtocolError):
    """An HTTP-level rejection; the body is a JSON-RPC error without an id."""

    code = ErrorCode.INVALID_REQUEST


class LimitReached(TransportError):
    """429 Too Many Requests, with the seconds after which trying again may work."""

    http_status = 429

    def __init__(self, message, retry_after):
        super().__init__(message, headers=[("retry-after", str(math.ceil(retry_after)))])


class ServerStopping(ProtocolError):
    """The process is being stopped (SIGTERM, a rolling deploy: running/drain.py). A request that
    reaches it then is refused with 503, ``Retry-After`` and ``Connection: close`` (``refusal``),
    so that the client, or its load balancer, sends it to another process; a call still running
    when the drain's grace ends is answered with this error in-band (``unfinished``)."""

    code = ErrorCode.SERVER_STOPPING
    http_status = 503

    @classmethod
    def refusal(cls) -> "ServerStopping":
        return cls("This server process is stopping: send the request again (another process takes it).",
                   headers=[("retry-after", "1"), ("connection", "close")])

    @classmethod
    def unfinished(cls, seconds: float) -> "ServerStopping":
        return cls(f"The server process was stopped (a restart or a deploy) before this call finished: it ran "
                   f"past the {seconds:g} s it was given to finish. It did not complete; send it again.",
                   http_status=200)
