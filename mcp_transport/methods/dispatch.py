"""MCP methods: JSON-RPC request in, result out. No HTTP, no streams.

``dispatch(request, call)`` runs one request for an open session and returns its result, or
raises a ``ProtocolError``; the request pipeline turns either into its era's answer
(running/pipeline.py: ``respond``, the one answer mapper). ``call`` gives what a
handler may need: the session, the user and, for tools, the channel that reaches the client.
"""
from .. import __version__  # noqa: F401 (the version server_info gives)
from ..protocol.errors import MethodNotFound
from ..protocol.jsonrpc import Request
# The Call, the method table and its facts, and every module that declares methods in it: importing
# dispatch makes METHODS complete (each module registers its handlers as it is imported, in this order).
from .method_table import (METHODS, Call, capabilities, counts_as_call, declares, initialize_result,  # noqa: F401
                           is_known_target, may_send, serve_tasks, server_info, spec_of, target_of, target_spec)
from .invoke import make_context, run_sync_or_async, waiting_caller  # noqa: F401
from .listing import (paginate, ping, prompts_list, resource_templates_list, resources_list,  # noqa: F401
                      tools_list, usable)
from .tool_calls import tools_call  # noqa: F401
from .resources_prompts import (completion_complete, logging_set_level, prompts_get,  # noqa: F401
                                require_readable, resources_read, resources_subscribe, resources_unsubscribe)
from .skills import resources_directory_read, skills_get, skills_list  # noqa: F401
from . import apps  # noqa: F401  (MCP Apps: declares its extension)


async def dispatch(request: Request, call: Call) -> dict:
    spec = METHODS.get(request.method)
    if spec is None or (spec.capability is not None and not declares(spec.capability)):
        raise MethodNotFound(f"Method not found: {request.method}.")
    return await spec.handler(request.params, call)
