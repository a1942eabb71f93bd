"""ping and the list methods: tools/list, resources/list (the resources, then the rows of the
templates that list their own), resources/templates/list, prompts/list, each in pages.
"""
import base64
import binascii
import json

from ..auth import may_use
from ..conf import get_config
from .context import Context
from ..protocol.errors import InvalidParams
from .invoke import run_sync_or_async
from .method_table import METHODS
from .registry import registry


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


def paginate(items: dict, params: dict, key: str, describe=None) -> dict:
    """A page of ``items`` (by name) under ``key``, each ``describe(item)`` (its ``describe()``)."""
    describe = describe or (lambda item: item.describe())
    names = sorted(items)
    cursor = params.get("cursor")
    if cursor is not None:
        after = _decode_cursor(cursor)
        names = [name for name in names if name > after]
    size = get_config()["PAGE_SIZE"]
    page = {key: [describe(items[name]) for name in names[:size]]}
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
    listed = {uri: spec for uri, spec in registry.resources.items() if spec.listed}  # not a skill's other files
    page = paginate(usable(listed, call), params, "resources")
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
