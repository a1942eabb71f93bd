"""MCP methods: JSON-RPC request in, result out. No HTTP, no streams.

``dispatch(request, call)`` runs one request for an open session and returns its result, or
raises a ``ProtocolError`` that the shell turns into a JSON-RPC error. ``call`` gives what a
handler may need: the session, the user and, for tools, the channel that reaches the client.
"""
import asyncio
import base64
import binascii
import inspect
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from django.db import close_old_connections, connections

from .. import __version__
from ..state import metrics, sessions
from . import threads
from ..auth import may_use
from ..conf import get_config
from .content import error_result
from .context import (LOG_LEVELS, ClientCapabilityError, ClientRequestError, Context, SyncContext, ToolCancelled,
                      manage_connections, release_database_connections)
from ..protocol.errors import ErrorCode, InvalidParams, MethodNotFound, ProtocolError, ResourceNotFound
from ..protocol.jsonrpc import Request, error_message, result_message
from .registry import ArgumentError, ToolError, registry
from .specs import UNKNOWN, MethodTable

logger = logging.getLogger(__name__)


@dataclass
class Call:
    """One request being served."""

    session: sessions.SessionRecord
    user: Any = None
    #: The auth.Principal of the request (its key, scopes and user).
    principal: Any = None
    #: Reaches the client while the request runs (notify, request, close_stream, cancelled).
    channel: Any = None
    #: Its place among its owner's running calls (a quotas.Slot), freed at its end unless the
    #: background job it creates takes it over.
    quota: Any = None
    #: True once a task of its own runs it (that task releases the quota).
    started: bool = False
    #: For the calls log (running/calls.py): when it began (monotonic), its body's size, and
    #: the background job it started or continued.
    began: float = field(default_factory=time.monotonic)
    request_bytes: int = 0
    job_id: str = ""
    #: Its OpenTelemetry span (tracing.py), or None; it ends with the call (calls.finished).
    span: Any = None
    #: The client's address (TRUSTED_PROXIES honoured): who a sessionless call is, without a principal.
    address: str = ""
    #: Whose share of the sync threads its code takes (threads.py): its session, else its caller
    #: (running/pipeline.py: ``begin``).
    owner: Any = None
    #: A background tool's call (running/pipeline.py decides it, before the call runs).
    background: bool = False
    #: Its calls-log record is made (exactly one per call).
    recorded: bool = False


#: What each capability declares when it is declared (``declares``); tasks' comes from its module.
_DECLARATIONS = {"logging": {}, "tools": {"listChanged": True}, "resources": {"subscribe": True, "listChanged": True},
                 "prompts": {"listChanged": True}, "completions": {}}


def capabilities() -> dict:
    """"Servers MUST ... declare" what they support; declare only what is registered."""
    caps = {name: dict(settings) for name, settings in _DECLARATIONS.items() if declares(name)}
    if declares("tasks"):
        caps["tasks"] = _tasks.capability()
    return caps


def declares(capability: str) -> bool:
    """Whether ``capabilities()`` has ``capability``: what every request asks, without building
    them all (the tasks check alone walks every tool)."""
    if capability == "logging":
        return True
    if capability == "tools":
        return bool(registry.tools)
    if capability == "resources":
        return bool(registry.resources or registry.templates)
    if capability == "prompts":
        return bool(registry.prompts)
    if capability == "completions":
        return bool(registry.prompts or registry.templates)
    if capability == "tasks":
        return _tasks is not None and any(spec.task_support for spec in registry.tools.values())
    return False


def server_info() -> dict:
    config = get_config()
    info = {"name": config["SERVER_NAME"], "version": config["SERVER_VERSION"] or __version__}
    if config["SERVER_TITLE"]:
        info["title"] = config["SERVER_TITLE"]
    return info


def initialize_result(protocol_version: str) -> dict:
    result = {"protocolVersion": protocol_version, "capabilities": capabilities(), "serverInfo": server_info()}
    if get_config()["INSTRUCTIONS"]:
        result["instructions"] = get_config()["INSTRUCTIONS"]
    return result


#: The methods of the 2025-11-25 era, each declared with its handler below (specs.py); the
#: 2026-07-28 era derives its table from this one.
METHODS = MethodTable()


def spec_of(request: Request):
    """The facts of the request's method (``specs.UNKNOWN`` for a method no table has)."""
    return METHODS.get(request.method, UNKNOWN)


def is_known_target(method: str, name: str) -> bool:
    """A tool or prompt of this name is registered (tracing names spans only after those)."""
    return name in (registry.tools if method == "tools/call" else registry.prompts)


def target_of(request: Request):
    """(kind, value) of the tool, prompt or resource the request names, or None."""
    spec = spec_of(request)
    value = spec.target_of(request.params) if spec.target_kind else ""
    return (spec.target_kind, value) if value else None


def counts_as_call(request: Request) -> bool:
    return spec_of(request).counts_as_call


def may_send(request: Request) -> bool:
    """Whether the handler can send messages before its result (then the reply must be SSE)."""
    return spec_of(request).may_send(request.params)


def _tool_may_send(params) -> bool:
    name = params.get("name")
    spec = registry.tools.get(name) if isinstance(name, str) else None  # a list is unhashable
    return spec is not None and spec.may_send


def _prompt_may_send(params) -> bool:
    """A prompt whose function takes a Context may ask the client."""
    name = params.get("name")
    spec = registry.prompts.get(name) if isinstance(name, str) else None
    return getattr(spec, "context_param", None) is not None


def _resource_may_send(params) -> bool:
    uri = params.get("uri")
    spec = registry.find_resource(uri)[0] if isinstance(uri, str) else None
    return getattr(spec, "context_param", None) is not None


# -- pagination ------------------------------------------------------------------------------
# Cursors are opaque: base64 of the last name on the previous page. Items are sorted by name,
# so a cursor stays valid while items come and go ("Provide stable cursors").

def _encode_cursor(name: str) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": name}).encode()).decode()


def _decode_cursor(cursor) -> str:
    try:
        after = json.loads(base64.urlsafe_b64decode(cursor.encode()))["after"]
        if isinstance(after, str):
            return after
    except (AttributeError, ValueError, TypeError, KeyError, binascii.Error):
        pass
    # "Invalid cursors SHOULD result in an error with code -32602" -- server/utilities/pagination
    raise InvalidParams("The cursor is not one this server issued.")


def paginate(items: dict, params: dict, key: str) -> dict:
    names = sorted(items)
    cursor = params.get("cursor")
    if cursor is not None:
        after = _decode_cursor(cursor)
        names = [name for name in names if name > after]
    size = get_config()["PAGE_SIZE"]
    page = {key: [items[name].describe() for name in names[:size]]}
    if len(names) > size:
        page["nextCursor"] = _encode_cursor(names[size - 1])
    return page


# -- handlers --------------------------------------------------------------------------------

@METHODS.method("ping")
async def ping(params, call):
    return {}


def usable(items: dict, call) -> dict:
    """The items this caller may use: the others are absent from its lists (auth.may_use)."""
    principal = call.principal
    return {key: spec for key, spec in items.items() if may_use(spec, principal)}


def target_spec(request: Request):
    """The tool, resource or prompt a call names, if it exists (for auth's scope check)."""
    spec = spec_of(request)
    target = spec.target_of(request.params) if spec.scoped else ""
    if not target:
        return None
    if spec.target_kind == "tool":
        return registry.tools.get(target)
    if spec.target_kind == "prompt":
        return registry.prompts.get(target)
    return registry.find_resource(target)[0]


@METHODS.method("tools/list", capability="tools")
async def tools_list(params, call):
    return paginate(usable(registry.tools, call), params, "tools")


@METHODS.method("resources/list", capability="resources")
async def resources_list(params, call):
    """The resources, then the rows of each template that lists its own (``ResourceSpec.lister``:
    the model toolsets' rows), each in pages of its own, one cursor leading from one to the next."""
    listers = sorted((spec for spec in usable(registry.templates, call).values() if spec.lister),
                     key=lambda spec: spec.uri)
    rows = _rows_cursor(params.get("cursor")) if listers else None
    if rows is not None:
        return await _rows_page(listers, *rows, call)
    page = paginate(usable(registry.resources, call), params, "resources")
    if listers and "nextCursor" not in page:
        page["nextCursor"] = _encode_rows_cursor(listers[0].uri, None)
    return page


def _encode_rows_cursor(template: str, at) -> str:
    return base64.urlsafe_b64encode(json.dumps({"rows": template, "at": at}).encode()).decode()


def _rows_cursor(cursor):
    """(template, the lister's own cursor) of a cursor into listed rows; None for another cursor."""
    try:
        decoded = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (AttributeError, ValueError, TypeError, binascii.Error):
        return None
    if isinstance(decoded, dict) and isinstance(decoded.get("rows"), str):
        return decoded["rows"], decoded.get("at")
    return None


async def _rows_page(listers, template, at, call):
    spec = next((spec for spec in listers if spec.uri == template), None)
    if spec is None:
        raise InvalidParams("The cursor is not one this server issued.")
    context = Context(channel=call.channel, session_id=call.session.id if call.session is not None else None,
                      request_id=None, user=call.user)
    entries, after = await run_sync_or_async(spec.lister, (context, at, get_config()["PAGE_SIZE"]), call=call)
    page = {"resources": entries}
    later = [other.uri for other in listers if other.uri > template]
    if after is not None:
        page["nextCursor"] = _encode_rows_cursor(template, after)
    elif later:
        page["nextCursor"] = _encode_rows_cursor(later[0], None)
    return page


@METHODS.method("resources/templates/list", capability="resources")
async def resource_templates_list(params, call):
    return paginate(usable(registry.templates, call), params, "resourceTemplates")


@METHODS.method("prompts/list", capability="prompts")
async def prompts_list(params, call):
    return paginate(usable(registry.prompts, call), params, "prompts")


def _string_param(params, name):
    value = params.get(name)
    if not isinstance(value, str) or not value:
        raise InvalidParams(f'"{name}" must be a non-empty string.')
    return value


def _object_param(params, name):
    value = params.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidParams(f'"{name}" must be an object.')
    return value


async def run_sync_or_async(func, args=(), kwargs=None, *, call=None, lane=threads.HANDLERS, calls_back=False):
    """Await an async function; run a sync one in a thread of ``lane``, in the share of the
    call's owner: its session, else its caller (threads.py: one owner's waiting never blocks
    another's; a sessionless call is not nobody's); it may use the ORM.

    ``calls_back``: the function uses a SyncContext (its methods hop back onto this loop)."""
    if inspect.iscoroutinefunction(func):
        return await func(*args, **(kwargs or {}))
    owner = threads.owner_of(_owner(call))
    return await threads.run(lane, owner, _with_fresh_connections(func), args, kwargs, calls_back=calls_back,
                             caller=waiting_caller(call))


def _owner(call):
    if call is None:
        return None
    if call.owner is not None:
        return call.owner
    return call.session.id if call.session is not None else None


def waiting_caller(call):
    """Whose share of the process's waits for clients a call's sync code takes: its principal
    when authorization is on, else the client address its session was opened from (None: the
    call has neither, and only its session's share and the process's bound apply)."""
    if call is None:
        return None
    key = getattr(call.principal, "key", "") if call.principal is not None else ""
    if key:
        return f"principal:{key}"
    address = getattr(call.session, "address", "") if call.session is not None else ""
    return f"address:{address}" if address else None


def _holds_a_connection() -> bool:
    return any(wrapper.connection is not None for wrapper in connections.all(initialized_only=True))


def _with_fresh_connections(func):
    def run(*args, **kwargs):
        if not manage_connections.get():
            return func(*args, **kwargs)
        close_old_connections()
        try:
            return func(*args, **kwargs)
        finally:
            close_old_connections()
            if not threads.connection_keepers.may_keep() and _holds_a_connection():  # 1 µs, then 7
                release_database_connections()
    return run


@METHODS.method("tools/call", capability="tools", counts_as_call=True, may_send=_tool_may_send, target="name",
                target_kind="tool", scoped=True, round_trip=True)
async def tools_call(params, call):
    name = _string_param(params, "name")
    spec = registry.tools.get(name)
    if spec is None or not may_use(spec, call.principal):
        # "Unknown tools" are protocol errors -- spec 2025-11-25 server/tools (Error Handling).
        # A tool the caller may not use is one it does not know.
        raise InvalidParams(f"Unknown tool: {name}.")
    arguments = _object_param(params, "arguments")
    task = _task_augmentation(spec, params)
    try:
        kwargs = spec.bind(arguments)
    except ArgumentError as exc:
        if task is not None:
            raise InvalidParams(str(exc)) from None
        return error_result(str(exc))
    if task is not None:
        return await _tasks.create(spec, arguments, params, call)
    if spec.context_param:
        kwargs[spec.context_param] = make_context(spec, params, call)
    return await _run_tool(spec, kwargs, call)


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


def runs_in_background(request: Request, principal=None) -> bool:
    """A plain tools/call of a background tool with valid arguments, that ``principal`` may
    use: a worker runs it. Otherwise dispatch answers (with the error, for one it may not use)."""
    if request.method != "tools/call" or not isinstance(request.params.get("name"), str):
        return False
    spec = registry.tools.get(request.params["name"])
    if spec is None or not spec.background or _task_requested(spec, request.params) or not may_use(spec, principal):
        return False
    try:
        spec.bind(_object_param(request.params, "arguments"))
    except (ArgumentError, InvalidParams):
        return False
    return True


def _task_requested(spec, params) -> bool:
    """True when dispatch must decide (a task, or an error about one)."""
    return (params.get("task") is not None or spec.task_support == "required") and declares("tasks")


def make_context(spec, params, call):
    meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
    context_class = Context if spec.is_async else SyncContext
    return context_class(channel=call.channel, session_id=call.session.id, request_id=call.channel.request_id,
                         progress_token=meta.get("progressToken"), user=call.user,
                         client_capabilities=call.session.client_capabilities, log_level=call.session.log_level)


async def _run_tool(spec, kwargs, call):
    limit = asyncio.timeout(get_config()["TOOL_MAX_SECONDS"])
    try:
        async with limit:
            value = await run_sync_or_async(spec.func, kwargs=kwargs, call=call, lane=threads.TOOLS,
                                            calls_back=spec.may_send)
    except (ToolError, ClientCapabilityError, ClientRequestError) as exc:
        return error_result(str(exc))
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


@METHODS.method("resources/read", capability="resources", counts_as_call=True, may_send=_resource_may_send,
                target="uri", target_kind="resource", scoped=True, round_trip=True)
async def resources_read(params, call):
    uri = _string_param(params, "uri")
    spec, variables = registry.find_resource(uri)
    if spec is None or not may_use(spec, call.principal):
        raise ResourceNotFound(f"Resource not found: {uri}.", data={"uri": uri})
    if spec.context_param:
        variables = {**variables, spec.context_param: make_context(spec, params, call)}
    value = await run_sync_or_async(spec.func, kwargs=variables, call=call, calls_back=spec.context_param is not None)
    return {"contents": spec.to_contents(uri, value)}


async def require_readable(uris, call) -> None:
    """Raise ResourceNotFound, as resources/read would, for the first of ``uris`` the caller
    may not read: resources/subscribe and subscriptions/listen run it, so an update never tells
    anyone of a resource (another user's row) it could not read. The resource's own
    ``readable`` checks (the model toolsets': ``get_queryset``, ``has_object_permission``) run
    in one thread for all of ``uris``."""
    checks = []
    for uri in uris:
        spec, variables = registry.find_resource(uri)
        if spec is None or not may_use(spec, call.principal):
            raise ResourceNotFound(f"Resource not found: {uri}.", data={"uri": uri})
        if spec.readable is not None:
            checks.append((spec.readable, variables))
    if checks:
        context = Context(channel=call.channel, session_id=call.session.id if call.session is not None else None,
                          request_id=None, user=call.user)
        await run_sync_or_async(_run_checks, (context, checks), call=call)


def _run_checks(context, checks):
    for readable, variables in checks:
        readable(context, **variables)


@METHODS.method("resources/subscribe", capability="resources", target="uri", target_kind="resource", scoped=True)
async def resources_subscribe(params, call):
    uri = _string_param(params, "uri")
    from .notify import subscribe

    await require_readable([uri], call)
    await subscribe(call.session.id, uri)
    return {}


@METHODS.method("resources/unsubscribe", capability="resources", target="uri", target_kind="resource")
async def resources_unsubscribe(params, call):
    uri = _string_param(params, "uri")
    from .notify import unsubscribe

    await unsubscribe(call.session.id, uri)
    return {}


@METHODS.method("prompts/get", capability="prompts", counts_as_call=True, may_send=_prompt_may_send, target="name",
                target_kind="prompt", scoped=True, round_trip=True)
async def prompts_get(params, call):
    name = _string_param(params, "name")
    spec = registry.prompts.get(name)
    if spec is None or not may_use(spec, call.principal):
        raise InvalidParams(f"Unknown prompt: {name}.")
    arguments = _object_param(params, "arguments")
    missing = spec.missing_arguments(arguments)
    if missing:
        raise InvalidParams(f"Missing required arguments for prompt {name}: {', '.join(missing)}.")
    known = {a["name"] for a in spec.arguments}
    kwargs = {k: v for k, v in arguments.items() if k in known}
    if spec.context_param:
        kwargs[spec.context_param] = make_context(spec, params, call)
    value = await run_sync_or_async(spec.func, kwargs=kwargs, call=call, calls_back=spec.context_param is not None)
    return spec.to_result(value)


@METHODS.method("completion/complete", capability="completions", counts_as_call=True)
async def completion_complete(params, call):
    ref, argument = _object_param(params, "ref"), _object_param(params, "argument")
    key = (ref.get("type"), ref.get("name") if ref.get("type") == "ref/prompt" else ref.get("uri"))
    if key[0] not in ("ref/prompt", "ref/resource") or not isinstance(key[1], str) \
            or not isinstance(argument.get("name"), str):
        raise InvalidParams("completion/complete needs a prompt or resource ref and an argument name.")
    completer = registry.completers.get(key) if _may_complete(key, call) else None
    values = []
    if completer is not None:
        context_arguments = _object_param(_object_param(params, "context"), "arguments")
        values = list(await run_sync_or_async(completer, (argument["name"], str(argument.get("value", "")),
                                                          context_arguments), call=call))
    # "values: An array of completion values. Must not exceed 100 items."
    return {"completion": {"values": values[:100], "total": len(values), "hasMore": len(values) > 100}}


def _may_complete(key, call) -> bool:
    """No completions for a prompt or template the caller may not use."""
    kind, name = key
    spec = registry.prompts.get(name) if kind == "ref/prompt" else registry.templates.get(name)
    return spec is None or may_use(spec, call.principal)


@METHODS.method("logging/setLevel", capability="logging")
async def logging_set_level(params, call):
    level = params.get("level")
    if level not in LOG_LEVELS:
        raise InvalidParams(f"Unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}.")
    await sessions.update(call.session, log_level=level)
    return {}


#: The 2025-11-25 tasks utility (eras/legacy_2025/tasks.py), once ``serve_tasks`` plugged it in.
_tasks = None


def serve_tasks(utility) -> None:
    """Serve the tasks utility's methods (``utility.METHODS``), its capability
    (``utility.capability()``) and task-augmented calls (``utility.create``). The app plugs in
    eras/legacy_2025/tasks.py when it is ready (apps.py): the methods, below the eras, import none."""
    global _tasks
    _tasks = utility
    METHODS.update(utility.METHODS)


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
