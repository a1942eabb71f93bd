"""Progressive discovery (methods/discovery.py, methods/tool_search.py): the ranking over the
example project's tools, permissions first, the index built once, call_tool's resolution and
the bad input of both tools. The live server, both eras, is tests/integration/test_discovery.py."""
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from mcp_transport.methods import discovery, dispatch, listing, tool_search
from mcp_transport.methods.registry import registry
from mcp_transport.methods.specs import CountedDict
from mcp_transport.protocol.errors import ErrorCode, InvalidParams
from mcp_transport.protocol.jsonrpc import Request

ROOT = Path(__file__).resolve().parents[3]
SEARCH = {"MCP_TRANSPORT": {"TOOL_DISCOVERY": "search"}}

#: Plain queries a model would write, and the tool it means: each in the first three.
MEANT = [
    ("change a book's title", "book_update"),
    ("who is the caller", "whoami"),
    ("sales report for a day", "sales_report"),
    ("count the words of a text", "word_count"),
    ("delete a book", "book_delete"),
    ("list the client's roots", "client_roots"),
    ("create an author", "author_create"),
    ("how many users are there", "count_users"),
    ("write a line to the server log", "server_log"),
    ("repeat my text back", "echo"),
    ("publish one of my books", "shelf_publish"),
    ("export rows in the background with progress", "export_report"),
]


def everyone():
    specs, _index = discovery.index()
    return [True] * len(specs)


@pytest.mark.parametrize("query, meant", MEANT)
def test_plain_queries_put_the_meant_tool_in_the_first_three(query, meant):
    specs, index = discovery.index()
    assert meant in index.search(query, everyone(), 3), index.search(query, everyone(), 10)


def test_a_tool_the_caller_may_not_use_is_never_shown_ranked_or_counted():
    specs, index = discovery.index()
    hidden = {"book_update", "shelf_update"}
    allowed = [spec.name not in hidden for spec in specs]
    assert hidden.isdisjoint(index.search("change a book's title", allowed, 50))
    # Counted for nothing: the ranking is the one an index of the allowed tools alone gives.
    own = tool_search.ToolIndex((spec.name, discovery.document(spec)) for spec in specs if spec.name not in hidden)
    for query, _meant in MEANT:
        assert index.search(query, allowed, 10) == own.search(query, [True] * len(own.keys), 10)
    assert index.search("book", [False] * len(specs), 5) == []


def test_the_index_is_built_once_and_again_only_when_the_registry_changes(monkeypatch):
    whoami = registry.tools["whoami"]
    tools = CountedDict(echo=registry.tools["echo"])
    monkeypatch.setattr(discovery.registry, "tools", tools)
    first = discovery.index()[1]
    assert discovery.index()[1] is first
    tools["whoami"] = whoami
    second = discovery.index()[1]
    assert second is not first and second.keys == ["echo", "whoami"]
    del tools["echo"]
    assert discovery.index()[1].keys == ["whoami"]


def test_terms_split_names_and_stem_plurals_and_verb_endings():
    assert tool_search.terms("book_list_all") == ["book", "list", "all"]
    assert tool_search.terms("listBooks of the Authors") == ["list", "book", "author"]
    assert tool_search.terms("change changed changes changing") == ["chang"] * 4
    assert tool_search.terms("books entries class") == ["book", "entry", "class"]


# -- call_tool: resolved into the named tool's own call ---------------------------------------

def call_tool(arguments, **extra):
    return Request(id=7, method="tools/call", params={"name": "call_tool", "arguments": arguments, **extra})


@override_settings(**SEARCH)
def test_call_tool_becomes_the_named_tools_call_with_its_meta_and_id():
    meta = {"progressToken": "p"}
    resolved = discovery.resolve(call_tool({"name": "echo", "arguments": {"text": "hi"}}, _meta=meta, task={}))
    assert resolved == Request(id=7, method="tools/call",
                               params={"name": "echo", "arguments": {"text": "hi"}, "_meta": meta, "task": {}})
    assert discovery.resolve(call_tool({"name": "whoami"})).params["arguments"] == {}


@pytest.mark.parametrize("arguments, says", [
    ("echo", "must be an object"),
    ({}, 'needs "name"'),
    ({"name": "call_tool"}, "not call_tool"),
    ({"name": "search_tools", "arguments": {"query": "x"}}, "not search_tools"),
    ({"name": "echo", "arguments": ["hi"]}, '"arguments" must be an object'),
    ({"name": "echo", "arguments": {}, "extra": 1}, "only"),
])
@override_settings(**SEARCH)
def test_bad_call_tool_arguments_are_invalid_params_in_one_sentence(arguments, says):
    with pytest.raises(InvalidParams) as raised:
        discovery.resolve(call_tool(arguments))
    assert raised.value.code == ErrorCode.INVALID_PARAMS and says in raised.value.message
    assert raised.value.message.count(". ") == 0
    # The rate window (read before the call is served) is the unresolved call's then.
    assert discovery.resolve(call_tool(arguments), strict=False).params["name"] == "call_tool"


def test_with_list_discovery_call_tool_is_not_resolved():
    request = call_tool({"name": "echo", "arguments": {"text": "hi"}})
    assert discovery.resolve(request) is request


# -- search_tools --------------------------------------------------------------------------------

def anyone():
    return SimpleNamespace(principal=None)


def test_search_answers_tool_definitions_as_tools_list_gives_them_and_the_same_as_text():
    result = discovery.search({"query": "who is the caller", "limit": 2}, anyone())
    tools = result["structuredContent"]["tools"]
    assert [tool["name"] for tool in tools][0] == "whoami" and len(tools) == 2
    assert tools[0] == registry.tools["whoami"].describe()
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


def test_search_shows_no_tool_needing_a_permission_the_caller_lacks():
    names = [tool["name"] for tool in discovery.search({"query": "how many users", "limit": 50},
                                                       anyone())["structuredContent"]["tools"]]
    assert "count_users" not in names  # auth.view_user: no user, no permission


@pytest.mark.parametrize("arguments, says", [
    ({"query": ""}, 'needs "query"'),
    ({"query": "   "}, 'needs "query"'),
    ({"query": 3}, 'needs "query"'),
    ({"query": "x" * 10_000}, "at most 500"),
    ({"query": "book", "limit": 0}, "from 1 to 50"),
    ({"query": "book", "limit": 51}, "from 1 to 50"),
    ({"query": "book", "limit": True}, "from 1 to 50"),
    ({"query": "book", "limit": "5"}, "from 1 to 50"),
    ({"query": "book", "other": 1}, "only"),
])
def test_bad_search_arguments_are_invalid_params(arguments, says):
    with pytest.raises(InvalidParams) as raised:
        discovery.search(arguments, anyone())
    assert says in raised.value.message


# -- tools/list ------------------------------------------------------------------------------

@pytest.fixture
def searching():
    with override_settings(**SEARCH):
        saved = dict(registry.tools)
        discovery.install()
        yield
    registry.tools.clear()
    registry.tools.update(saved)


@pytest.mark.asyncio
async def test_with_search_discovery_tools_list_lists_the_pinned_tools_and_the_search(searching, monkeypatch):
    call = dispatch.Call(session=None)
    names = [tool["name"] for tool in (await listing.tools_list({}, call))["tools"]]
    assert names == ["call_tool", "search_tools"]
    monkeypatch.setattr(registry.tools["echo"], "pinned", True)
    with override_settings(MCP_TRANSPORT={"TOOL_DISCOVERY": "search", "PINNED_TOOLS": ["whoami"]}):
        names = [tool["name"] for tool in (await listing.tools_list({}, call))["tools"]]
    assert names == ["call_tool", "echo", "search_tools", "whoami"]


@pytest.mark.asyncio
async def test_with_list_discovery_tools_list_is_unchanged_and_has_neither_tool():
    names = [tool["name"] for tool in (await listing.tools_list({}, dispatch.Call(session=None)))["tools"]]
    assert "echo" in names and discovery.OWN.isdisjoint(names)


# -- docs/discovery.md's snippets work as printed --------------------------------------------

DOC_BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "discovery.md").read_text(), re.S)


@pytest.mark.asyncio
async def test_the_docs_settings_and_pinned_tool_work_as_printed(monkeypatch):
    settings_block, pinned_block = DOC_BLOCKS
    namespace = {}
    exec(settings_block, namespace)
    monkeypatch.setattr(registry, "tools", CountedDict(registry.tools))  # the snippet's tool goes with it
    exec(pinned_block, {})
    with override_settings(MCP_TRANSPORT=namespace["MCP_TRANSPORT"]):
        discovery.install()
        listed = (await listing.tools_list({}, dispatch.Call(session=None)))["tools"]
    assert [tool["name"] for tool in listed] == ["call_tool", "library_hours", "search_tools", "whoami"]


def test_a_discovery_mode_that_does_not_exist_is_refused_at_start_up():
    with override_settings(MCP_TRANSPORT={"TOOL_DISCOVERY": "serach"}):
        with pytest.raises(ImproperlyConfigured, match='must be "list" or "search"'):
            discovery.install()


def test_a_tool_switched_off_is_no_ones_and_only_tools_are_switched(monkeypatch):
    from mcp_transport.auth import may_use
    from mcp_transport.state import switches

    echo = registry.tools["echo"]
    resource = next(spec for spec in registry.resources.values() if may_use(spec, None))  # anyone's
    monkeypatch.setattr(switches, "_off", frozenset({"echo", resource.name}))
    assert not may_use(echo, None) and may_use(resource, None)  # a resource of the same name stays
    assert "echo" not in [tool["name"] for tool in
                          discovery.search({"query": "repeat my text back", "limit": 50}, anyone())["structuredContent"]["tools"]]
    monkeypatch.setattr(switches, "_off", frozenset())
    assert may_use(echo, None)
