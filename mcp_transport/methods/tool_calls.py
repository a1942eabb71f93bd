"""tools/call: the tool's arguments bound, a task-augmented call handed to the tasks utility, the
tool run within TOOL_MAX_SECONDS; and which calls the handler decides as tasks (``task_requested``).
"""
import logging

from ..state import metrics
from . import discovery, method_table, threads
from ..auth import may_use
from ..conf import get_config
from .content import error_result
from .context import ClientCapabilityError, ClientRequestError, ToolCancelled
from .database_time import StatementTimeout
from ..protocol.errors import InvalidParams, MethodNotFound, ProtocolError
from .invoke import make_context, run_sync_or_async
from .method_table import METHODS, declares
from .params import object_param, string_param
from .registry import ArgumentError, ToolError, registry
from .time_limits import TimeLimit

#: A tool that raised is logged under the name it always had (dispatch's), which LOGGING may name.
logger = logging.getLogger("mcp_transport.methods.dispatch")


def _tool_may_send(params) -> bool:
    """(Requests no route was made for: a tasks utility's replay) the named tool may send."""
    name = params.get("name")
    spec = registry.tools.get(name) if isinstance(name, str) else None  # a list is unhashable
    return spec is not None and spec.may_send


def _tool_blocks(params) -> bool:
    name = params.get("name")
    spec = registry.tools.get(name) if isinstance(name, str) else None
    return spec is not None and spec.blocks


@METHODS.method("tools/call", capability="tools", counts_as_call=True, may_send=_tool_may_send, target="name",
                target_kind="tool", scoped=True, round_trip=True, blocks=_tool_blocks)
async def tools_call(params, call):
    """Run the tool the request names (its route's: looked up, checked and bound once)."""
    name = string_param(params, "name")
    route = call.route if call.route is not None and call.route.request.params is params else None
    spec, usable = (route.tool, route.usable) if route is not None else _looked_up(name, call.principal)
    if spec is None or not usable:
        # "Unknown tools" are protocol errors -- spec 2025-11-25 server/tools (Error Handling).
        # A tool the caller may not use is one it does not know.
        raise InvalidParams(f"Unknown tool: {name}.")
    arguments = object_param(params, "arguments")
    if spec is discovery.SEARCH:  # it reads who calls (what it may use) and sends nothing: no Context
        return discovery.search(arguments, call)
    task = _task_augmentation(spec, params)
    try:
        kwargs = route.bound_arguments(spec, arguments) if route is not None else spec.bind(arguments)
    except ArgumentError as exc:
        if task is not None:
            raise InvalidParams(str(exc)) from None
        return error_result(str(exc))
    if task is not None:
        return await method_table.tasks_utility.create(spec, arguments, params, call)
    if spec.context_param:
        kwargs[spec.context_param] = make_context(spec, params, call)
    return await _run_tool(spec, kwargs, call)


def _looked_up(name: str, principal) -> tuple:
    """(the tool, whether ``principal`` may use it) of a call with no route of its own."""
    spec = registry.tools.get(name)
    return spec, spec is not None and may_use(spec, principal)


def _task_augmentation(spec, params):
    """The ``task`` field of a task-augmented call, or None for a plain call.

    "Receivers that do not declare the task capability for a request type MUST process requests
    of that type normally, ignoring any task-augmentation metadata"; with the capability, a tool
    without task support answers -32601, and so does a plain call of a tool that requires a task
    -- spec 2025-11-25 basic/utilities/tasks (Tool-Level Negotiation)."""
    task = params.get("task")
    if task is None and spec.task_support != "required":
        return None  # a plain call that may be one: nothing to decide (declares() walks every tool)
    if not declares("tasks"):
        return None
    if task is not None and not spec.task_support:
        raise MethodNotFound(f"Tool {spec.name} cannot be called as a task.")
    if task is None and spec.task_support == "required":
        raise MethodNotFound(f"Tool {spec.name} must be called as a task.")
    if task is not None and not isinstance(task, dict):
        raise InvalidParams('"task" must be an object.')
    return task


def task_requested(spec, params) -> bool:
    """A task-augmented call, or one that must be (an error then): the handler decides, and a
    background tool's call is not handed to a job as it is (running/routes.py)."""
    return (params.get("task") is not None or spec.task_support == "required") and declares("tasks")


async def _run_tool(spec, kwargs, call):
    limit = TimeLimit(get_config()["TOOL_MAX_SECONDS"])
    try:
        async with limit:
            value = await run_sync_or_async(spec.func, kwargs=kwargs, call=call, lane=threads.TOOLS,
                                            calls_back=spec.may_send, statement_timeout=spec.statement_timeout,
                                            is_async=spec.is_async)
    except (ToolError, ClientCapabilityError, ClientRequestError) as exc:
        return error_result(str(exc))
    except StatementTimeout as exc:  # the database stopped it: one sentence, no traceback
        metrics.incr("limit_refusals:statement_seconds")
        return error_result(f"Tool {spec.name}: {exc}")
    except (ToolCancelled, ProtocolError):
        raise  # a ProtocolError is a tool asking for a JSON-RPC error (e.g. -32021)
    except Exception as exc:
        if limit.expired():
            return _stopped(spec, kwargs)
        logger.exception("tool %s raised", spec.name)
        return error_result(f"Tool {spec.name} failed: {type(exc).__name__}.")
    return spec.to_result(value)


def _stopped(spec, kwargs):
    """TOOL_MAX_SECONDS passed: an async tool was cancelled; a sync one's thread cannot be, so
    its Context says cancelled from now on (``check_cancelled()`` raises) and its result is
    dropped."""
    context = kwargs.get(spec.context_param) if spec.context_param else None
    if context is not None:
        context.stop()
    metrics.incr("limit_refusals:tool_seconds")
    seconds = get_config()["TOOL_MAX_SECONDS"]
    return error_result(f"Tool {spec.name} ran longer than this server's limit of {seconds:g} s and was stopped.")
