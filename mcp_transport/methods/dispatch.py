"""MCP methods: JSON-RPC request in, result out. No HTTP, no streams.

``dispatch(request, call)`` runs one request for an open session and returns its result, or
raises a ``ProtocolError`` that the shell turns into a JSON-RPC error. ``call`` gives what a
handler may need: the session, the user and, for tools, the channel that reaches the client.
"""
import logging

from .. import __version__  # noqa: F401 (the version server_info gives)
from .context import ToolCancelled
from ..protocol.errors import ErrorCode, MethodNotFound, ProtocolError
from ..protocol.jsonrpc import Request, error_message, result_message
# The Call, the method table and its facts, and every module that declares methods in it: importing
# dispatch makes METHODS complete (each module registers its handlers as it is imported, in this order).
from .method_table import (METHODS, Call, capabilities, counts_as_call, declares, initialize_result,  # noqa: F401
                           is_known_target, may_send, serve_tasks, server_info, spec_of, target_of, target_spec)
from .invoke import make_context, run_sync_or_async, waiting_caller  # noqa: F401
from .listing import (paginate, ping, prompts_list, resource_templates_list, resources_list,  # noqa: F401
                      tools_list, usable)
from .tool_calls import runs_in_background, tools_call  # noqa: F401
from .resources_prompts import (completion_complete, logging_set_level, prompts_get,  # noqa: F401
                                require_readable, resources_read, resources_subscribe, resources_unsubscribe)

logger = logging.getLogger(__name__)


async def dispatch(request: Request, call: Call) -> dict:
    spec = METHODS.get(request.method)
    if spec is None or (spec.capability is not None and not declares(spec.capability)):
        raise MethodNotFound(f"Method not found: {request.method}.")
    return await spec.handler(request.params, call)


async def answer(request: Request, call: Call) -> dict:
    """The JSON-RPC answer of one request: its result, or the error it raised (-32603, and a log
    record, for one nobody meant). A cancel (ToolCancelled, asyncio's) goes through."""
    try:
        return result_message(request.id, await dispatch(request, call))
    except ProtocolError as exc:
        return error_message(request.id, exc.code, exc.message, exc.data)
    except ToolCancelled:
        raise
    except Exception:
        logger.exception("%s failed", request.method)  # the record carries the (short) session id
        return error_message(request.id, ErrorCode.INTERNAL_ERROR, "Internal error.")
