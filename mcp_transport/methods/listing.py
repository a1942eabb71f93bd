"""ping and the list methods: tools/list, resources/list (the resources, then the rows of the
templates that list their own), resources/templates/list, prompts/list, each in pages.
"""
from ..auth import may_use
from ..conf import get_config
from .context import Context
from ..protocol import list_cursors
from ..protocol.errors import InvalidParams
from .discovery import listed
from .invoke import run_sync_or_async
from .method_table import METHODS
from .registry import registry


# -- pagination ------------------------------------------------------------------------------
# Cursors are opaque (protocol/list_cursors.py, which reads them as untrusted input): the last
# name on the previous page, {"after": name}. Items are sorted by name, so a cursor stays valid
# while items come and go ("Provide stable cursors"). resources/list goes on into the rows of the
# templates that list their own: {"rows": template, "at": the lister's own cursor or null}.

def _after(value) -> str:
    return list_cursors.text(list_cursors.field(value, "after"))


def _resources_position(value):
    """A resources/list cursor's value: the name it is after, or (template, the lister's cursor)."""
    if isinstance(value, dict) and "rows" in value:
        return list_cursors.text(value["rows"]), list_cursors.optional_text(list_cursors.field(value, "at"))
    return _after(value)


def paginate(items: dict, params: dict, key: str, describe=None) -> dict:
    """A page of ``items`` (by name) under ``key``, each ``describe(item)`` (its ``describe()``)."""
    cursor = params.get("cursor")
    return _names_page(items, None if cursor is None else list_cursors.read(cursor, _after), key, describe)


def _names_page(items: dict, after, key: str, describe=None) -> dict:
    describe = describe or (lambda item: item.describe())
    names = sorted(name for name in items if after is None or name > after)
    size = get_config()["PAGE_SIZE"]
    page = {key: [describe(items[name]) for name in names[:size]]}
    if len(names) > size:
        page["nextCursor"] = list_cursors.issue({"after": names[size - 1]})
    return page


# -- handlers --------------------------------------------------------------------------------

@METHODS.method("ping")
async def ping(params, call):
    return {}


def usable(items: dict, call) -> dict:
    """The items this caller may use: the others are absent from its lists (auth.may_use)."""
    principal = call.principal
    return {key: spec for key, spec in items.items() if may_use(spec, principal)}


@METHODS.method("tools/list", capability="tools")
async def tools_list(params, call):
    return paginate(listed(usable(registry.tools, call)), params, "tools")


@METHODS.method("resources/list", capability="resources")
async def resources_list(params, call):
    """The resources, then the rows of each template that lists its own (``ResourceSpec.lister``:
    the model toolsets' rows), each in pages of its own, one cursor leading from one to the next."""
    listers = sorted((spec for spec in usable(registry.templates, call).values() if spec.lister),
                     key=lambda spec: spec.uri)
    cursor = params.get("cursor")
    position = None if cursor is None else list_cursors.read(cursor, _resources_position)
    if isinstance(position, tuple):
        return await _rows_page(listers, *position, call)
    listed = {uri: spec for uri, spec in registry.resources.items() if spec.listed}  # not a skill's other files
    page = _names_page(usable(listed, call), position, "resources")
    if listers and "nextCursor" not in page:
        page["nextCursor"] = _rows_cursor(listers[0].uri, None)
    return page


def _rows_cursor(template: str, at) -> str:
    return list_cursors.issue({"rows": template, "at": at})


async def _rows_page(listers, template, at, call):
    spec = next((spec for spec in listers if spec.uri == template), None)
    if spec is None:  # a template this caller may not list (any more), or none
        raise InvalidParams(list_cursors.NOT_ISSUED)
    context = Context(channel=call.channel, session_id=call.session.id if call.session is not None else None,
                      request_id=None, user=call.user)
    entries, after = await run_sync_or_async(spec.lister, (context, at, get_config()["PAGE_SIZE"]), call=call)
    page = {"resources": entries}
    later = [other.uri for other in listers if other.uri > template]
    if after is not None:
        page["nextCursor"] = _rows_cursor(template, after)
    elif later:
        page["nextCursor"] = _rows_cursor(later[0], None)
    return page


@METHODS.method("resources/templates/list", capability="resources")
async def resource_templates_list(params, call):
    return paginate(usable(registry.templates, call), params, "resourceTemplates")


@METHODS.method("prompts/list", capability="prompts")
async def prompts_list(params, call):
    return paginate(usable(registry.prompts, call), params, "prompts")
