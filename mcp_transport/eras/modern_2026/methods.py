"""The methods of the 2026-07-28 era: everything era-independent in dispatch, less what
2026-07-28 removed, plus its own (``server/discover``, ``subscriptions/listen``, the tasks
extension's and its experimental ``tasks/stream``), with what ``server/discover`` declares and
the cache hints of its results."""
from ...conf import get_config
from ...methods import dispatch, extensions
from ...protocol import modern, tasks_extension
from ...methods.specs import always
from . import listen, task_streams, tasks as modern_tasks

#: Defaults of the CACHE_HINTS setting: (ttlMs, cacheScope) per cacheable method. "private"
#: because lists "MAY vary by the authorization presented" (spec 2026-07-28 server/tools).
CACHE_DEFAULTS = {
    "server/discover": (60_000, "private"),
    "tools/list": (60_000, "private"),
    "prompts/list": (60_000, "private"),
    "resources/list": (60_000, "private"),
    "resources/templates/list": (60_000, "private"),
    "resources/read": (0, "private"),
    # SEP-2640: "In protocol versions 2026-07-28 and later, the [skills/list] result also carries
    # the base protocol's list-caching attributes"; skills/get and resources/directory/read too.
    "skills/list": (60_000, "private"),
    "skills/get": (60_000, "private"),
    "resources/directory/read": (60_000, "private"),
}


def cache_hint(method):
    if method not in CACHE_DEFAULTS:
        return None
    configured = (get_config()["CACHE_HINTS"] or {}).get(method) or {}
    ttl, scope = CACHE_DEFAULTS[method]
    return configured.get("ttlMs", ttl), configured.get("cacheScope", scope)


# The tasks extension is this era's only (methods/extensions.py: the one table of extensions).
extensions.declare(tasks_extension.EXTENSION, modern_tasks.offer, eras=(extensions.MODERN,))


def capabilities() -> dict:
    """What server/discover declares: the legacy capabilities minus what 2026-07-28 moved out
    (tasks is the io.modelcontextprotocol/tasks extension now), with this era's extensions."""
    caps = dispatch.capabilities(extensions.MODERN)
    caps.pop("tasks", None)
    return caps


def declares(capability: str) -> bool:
    """Whether ``capabilities()`` has ``capability``, without building them all; an extension's
    identifier (the tasks extension's methods ask for theirs): whether it is offered now."""
    if capability == "extensions":
        return bool(extensions.offered(extensions.MODERN))
    if capability in extensions.DECLARED:
        return extensions.offers(capability, extensions.MODERN)
    if capability == "task_streams":  # experimental (SEP-2694): a method of the tasks extension
        return get_config()["TASK_STREAMS"] and modern_tasks.offer() is not None
    return capability != "tasks" and dispatch.declares(capability)


async def discover(params, call):
    result = {"supportedVersions": list(modern.MODERN_VERSIONS), "capabilities": capabilities()}
    if get_config()["INSTRUCTIONS"]:
        result["instructions"] = get_config()["INSTRUCTIONS"]
    return result


async def tools_list(params, call):
    page = await dispatch.tools_list(params, call)
    # execution.taskSupport left the core schema with the tasks utility (spec 2026-07-28 changelog).
    page["tools"] = [{k: v for k, v in tool.items() if k != "execution"} for tool in page["tools"]]
    return page


async def subscriptions_listen(params, call):
    return await listen.listen(params, call, capabilities())


#: The methods of this era. Other modules (the tasks extension) may add theirs here.
METHODS = dispatch.METHODS.derive(without=modern.REMOVED_METHODS | {name for name in dispatch.METHODS
                                                                     if name.startswith("tasks/")},
                                  handlers={"tools/list": tools_list})
METHODS.method("server/discover")(discover)
# It sends notifications until the client leaves: a stream of its own, in a task of its own.
METHODS.method("subscriptions/listen", may_send=always)(subscriptions_listen)
METHODS.update(modern_tasks.METHODS)
METHODS.update(task_streams.METHODS)
