"""resources/read, resources/subscribe and resources/unsubscribe (and ``require_readable``, the
check a subscription makes first), prompts/get, completion/complete and logging/setLevel.
"""
from ..state import sessions
from ..auth import may_use
from .context import LOG_LEVELS, Context
from ..protocol import versions
from ..protocol.errors import InvalidParams, ResourceNotFound
from .invoke import make_context, run_sync_or_async
from .method_table import METHODS
from .params import object_param, string_param
from .registry import registry


def _prompt_may_send(params) -> bool:
    """A prompt whose function takes a Context may ask the client."""
    name = params.get("name")
    spec = registry.prompts.get(name) if isinstance(name, str) else None
    return getattr(spec, "context_param", None) is not None


def _resource_may_send(params) -> bool:
    uri = params.get("uri")
    spec = registry.find_resource(uri)[0] if isinstance(uri, str) else None
    # A view (methods/apps.py) takes a Context for the caller's user only: it asks nothing.
    return getattr(spec, "context_param", None) is not None and getattr(spec, "may_send", True)


@METHODS.method("resources/read", capability="resources", counts_as_call=True, may_send=_resource_may_send,
                target="uri", target_kind="resource", scoped=True, round_trip=True)
async def resources_read(params, call):
    uri = string_param(params, "uri")
    spec, variables = registry.find_resource(uri)
    if spec is None or not may_use(spec, call.principal):
        raise ResourceNotFound(f"Resource not found: {uri}.", data={"uri": uri})
    if spec.context_param:
        variables = {**variables, spec.context_param: make_context(spec, params, call)}
    value = await run_sync_or_async(spec.func, kwargs=variables, call=call, calls_back=spec.context_param is not None)
    result = {"contents": spec.to_contents(uri, value)}
    if getattr(spec, "per_user", False) and call.session.protocol_version in versions.MODERN:
        # Rendered for its user (an MCP Apps view): "private" whatever CACHE_HINTS says of
        # resources/read, so that no shared cache hands it to another user (the stamp keeps it).
        result["cacheScope"] = "private"
    return result


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
    uri = string_param(params, "uri")
    from .notify import subscribe

    await require_readable([uri], call)
    await subscribe(call.session.id, uri)
    return {}


@METHODS.method("resources/unsubscribe", capability="resources", target="uri", target_kind="resource")
async def resources_unsubscribe(params, call):
    uri = string_param(params, "uri")
    from .notify import unsubscribe

    await unsubscribe(call.session.id, uri)
    return {}


@METHODS.method("prompts/get", capability="prompts", counts_as_call=True, may_send=_prompt_may_send, target="name",
                target_kind="prompt", scoped=True, round_trip=True)
async def prompts_get(params, call):
    name = string_param(params, "name")
    spec = registry.prompts.get(name)
    if spec is None or not may_use(spec, call.principal):
        raise InvalidParams(f"Unknown prompt: {name}.")
    arguments = object_param(params, "arguments")
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
    ref, argument = object_param(params, "ref"), object_param(params, "argument")
    key = (ref.get("type"), ref.get("name") if ref.get("type") == "ref/prompt" else ref.get("uri"))
    if key[0] not in ("ref/prompt", "ref/resource") or not isinstance(key[1], str) \
            or not isinstance(argument.get("name"), str):
        raise InvalidParams("completion/complete needs a prompt or resource ref and an argument name.")
    completer = registry.completers.get(key) if _may_complete(key, call) else None
    values = []
    if completer is not None:
        context_arguments = object_param(object_param(params, "context"), "arguments")
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
