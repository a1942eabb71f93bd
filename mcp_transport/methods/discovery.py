"""Progressive discovery (TOOL_DISCOVERY = "search", docs/discovery.md): tools/list lists the
pinned tools and two of its own, ``search_tools`` and ``call_tool``, instead of the whole catalog.

- ``search_tools(query, limit)`` ranks the tools the caller may use (tool_search.py: BM25F
  over an index built once per process, and again only when the registry changes) and answers
  their definitions as tools/list gives them, best first.
- ``call_tool(name, arguments)`` is not run as a tool: ``resolve`` turns its request into the
  named tool's own tools/call before anything else looks at it (running/pipeline.py: ``serve``),
  so that every rule of a direct call (permissions, scopes, limits, rate, record, progress,
  background job or task, elicitation) applies once, to the real tool.

Permissions first: a tool the caller may not use (auth.may_use) is neither shown, ranked nor
counted, whatever the query.
"""
import json
from typing import Optional

from django.core.exceptions import ImproperlyConfigured

from ..auth import may_use
from ..conf import get_config
from ..protocol import apps
from ..protocol.errors import InvalidParams
from ..protocol.jsonrpc import Request
from . import content
from .method_table import target_of
from .registry import make_tool, registry
from .tool_search import ToolIndex

SEARCH_TOOLS, CALL_TOOL = "search_tools", "call_tool"
MODES = ("list", "search")
#: A query longer than this is not a question about tools (and would cost more than it is worth).
MAX_QUERY_CHARS = 500
#: Most tools one search answers.
MAX_LIMIT = 50


def searching() -> bool:
    return get_config()["TOOL_DISCOVERY"] == "search"


def _only_when_searching(principal) -> bool:
    return searching()


def search_tools(query: str, limit: int = 5) -> dict:
    """Find the tools for a task among those you may use: each answered as tools/list would
    give it (name, description, inputSchema), best match first. Run one with call_tool.

    Args:
        query: What you want to do, in plain words (e.g. "change a book's title").
        limit: How many tools to answer, 1 to 50.
    """
    raise AssertionError("search_tools is answered by discovery.search")  # tool_calls.tools_call


def call_tool(name: str, arguments: Optional[dict] = None) -> dict:
    """Run a tool that search_tools found, exactly as calling it by its name would.

    Args:
        name: The tool's name, as search_tools gave it.
        arguments: The tool's arguments, as its inputSchema describes them.
    """
    raise AssertionError("call_tool is resolved into the named tool's call")  # discovery.resolve


_OUTPUT = {"type": "object", "properties": {"tools": {"type": "array", "items": {"type": "object"}}},
           "required": ["tools"]}
SEARCH = make_tool(search_tools, output_schema=_OUTPUT, annotations={"readOnlyHint": True, "openWorldHint": False})
CALL = make_tool(call_tool, structured_output=False, annotations={"openWorldHint": True})
OWN = frozenset((SEARCH_TOOLS, CALL_TOOL))


def install() -> None:
    """Offer the two tools, with "search" discovery (apps.py, once the tools are registered),
    and build the index then, not on the first search. With "list" nothing is registered, and
    should the setting change later, they are as unknown as a tool never registered."""
    mode = get_config()["TOOL_DISCOVERY"]
    if mode not in MODES:  # a typo must not quietly list every tool
        raise ImproperlyConfigured(f'MCP_TRANSPORT["TOOL_DISCOVERY"] is {mode!r}: it must be "list" or "search".')
    if mode != "search":
        return
    for spec in (SEARCH, CALL):
        spec.visible = _only_when_searching
        registry.tools[spec.name] = spec
    index()


# -- tools/list ------------------------------------------------------------------------------

def listed(usable_tools: dict) -> dict:
    """What tools/list lists of the tools the caller may use: all of them ("list"), or the
    pinned ones and the search ("search")."""
    if not searching():
        return usable_tools
    pinned = set(get_config()["PINNED_TOOLS"])
    return {name: spec for name, spec in usable_tools.items() if spec.pinned or name in pinned or name in OWN}


# -- call_tool -------------------------------------------------------------------------------

def resolve(request: Request, strict: bool = True) -> Request:
    """The request to serve for ``request``: a call of ``call_tool`` is the call of the tool it
    names (its ``_meta``, ``task`` and id kept), anything else is itself. Bad ``call_tool``
    arguments raise InvalidParams (``strict``), or leave the request as it is."""
    params = request.params
    if params.get("name") != CALL_TOOL or target_of(request) != ("tool", CALL_TOOL) or not searching():
        return request
    try:
        name, arguments = _target(params.get("arguments"))
    except InvalidParams:
        if strict:
            raise
        return request
    return Request(id=request.id, method=request.method, params={**params, "name": name, "arguments": arguments})


def _target(arguments) -> tuple:
    if not isinstance(arguments, dict):
        raise InvalidParams("call_tool's arguments must be an object with the tool's name and arguments.")
    name, inner = arguments.get("name"), arguments.get("arguments", {})
    if not isinstance(name, str) or not name:
        raise InvalidParams('call_tool needs "name": the name of a tool search_tools found.')
    if name in OWN:
        raise InvalidParams(f"call_tool runs the tools search_tools finds, not {name}.")
    if not isinstance(inner, dict):
        raise InvalidParams(f'call_tool\'s "arguments" must be an object: the arguments of {name}.')
    if set(arguments) - {"name", "arguments"}:
        raise InvalidParams('call_tool takes "name" and "arguments" only.')
    return name, inner


# -- search_tools ----------------------------------------------------------------------------

_built = None  # (the registry's tools and their version, the specs in index order, the index)


def index() -> tuple:
    """(the specs, in index order, and their ToolIndex): built once, and again when the
    registry's tools change (specs.CountedDict counts their changes)."""
    global _built
    tools = registry.tools
    key = (id(tools), getattr(tools, "version", None))
    if _built is None or _built[0] != key or key[1] is None:
        # A tool only an app's view may call is not the model's to find (search results go to
        # the model, where a host's filter of tools/list cannot reach them); call_tool still runs it.
        specs = [tools[name] for name in sorted(tools) if name not in OWN and apps.for_the_model(tools[name].meta)]
        _built = (key, specs, ToolIndex((spec.name, document(spec)) for spec in specs))
    return _built[1], _built[2]


def document(spec) -> dict:
    """The fields of a tool the search reads: its name, title, description, parameters (names
    and descriptions) and group (the module, app or toolset that made it)."""
    properties = (spec.input_schema or {}).get("properties") or {}
    parameters = " ".join(f"{name} {(schema or {}).get('description', '') if isinstance(schema, dict) else ''}"
                          for name, schema in properties.items())
    module = getattr(spec.func, "__module__", "") or ""
    return {"name": spec.name, "title": spec.title or "", "description": spec.description or "",
            "parameters": parameters, "group": module.replace(".", " ")}


def search(arguments, call) -> dict:
    """search_tools' result for the caller of ``call``; bad arguments raise InvalidParams."""
    query, limit = _search_arguments(arguments)
    specs, tool_index = index()
    principal = call.principal
    allowed = [may_use(spec, principal) for spec in specs]
    names = tool_index.search(query, allowed, limit)
    tools = [registry.tools[name].describe() for name in names]
    found = {"tools": tools}
    # "a tool that returns structured content SHOULD also return the serialized JSON in a
    # TextContent block" -- spec 2025-11-25 server/tools
    return {"content": [content.text(json.dumps(found, ensure_ascii=False))], "structuredContent": found}


def _search_arguments(arguments) -> tuple:
    if not isinstance(arguments, dict):
        raise InvalidParams("search_tools' arguments must be an object.")
    query, limit = arguments.get("query"), arguments.get("limit", 5)
    if not isinstance(query, str) or not query.strip():
        raise InvalidParams('search_tools needs "query": what you want to do, in a few words.')
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidParams(f"search_tools' query is {len(query)} characters; at most {MAX_QUERY_CHARS} are read.")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidParams(f'search_tools\' "limit" must be a whole number from 1 to {MAX_LIMIT}.')
    if set(arguments) - {"query", "limit"}:
        raise InvalidParams('search_tools takes "query" and "limit" only.')
    return query, limit


def caller_dependent(request: Request) -> bool:
    """The result of ``request`` is the caller's own (search_tools: what it may use)."""
    # The name first: every 2026-07-28 result asks (its cache hint), few name search_tools.
    return request.params.get("name") == SEARCH_TOOLS and target_of(request) == ("tool", SEARCH_TOOLS)
