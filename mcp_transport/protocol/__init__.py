"""The sans-I/O MCP protocol core: JSON-RPC, SSE, HTTP checks, ids, session rules.

Standard library only: no Django, Channels, Redis, Celery or asyncio here. The Channels shell
feeds it bytes and strings and acts on what it returns or raises.
"""
from . import http, ids, jsonrpc, session, sse, versions
from .errors import (ErrorCode, InvalidParams, InvalidRequest, LocalProtocolError, MethodNotFound,
                     ParseError, ProtocolError, RemoteProtocolError, ResourceNotFound,
                     TransportError)
from .ids import EventId
from .session import SessionState
from .sse import SseDecoder, SseEvent

__all__ = [
    "ErrorCode", "EventId", "InvalidParams", "InvalidRequest", "LocalProtocolError",
    "MethodNotFound", "ParseError", "ProtocolError", "RemoteProtocolError", "ResourceNotFound",
    "SessionState", "SseDecoder", "SseEvent", "TransportError", "http", "ids", "jsonrpc",
    "session", "sse", "versions",
]
