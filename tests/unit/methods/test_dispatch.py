"""dispatch: the pure parts (pagination, capabilities, handlers that need no session store).

The registry dispatch's methods read is replaced by a fresh ``Registry()`` in every test.
logging/setLevel and resources/(un)subscribe touch Redis and are covered by the integration tests.
"""
import base64
import json
import logging
import threading

import pytest
from django.test import override_settings

from mcp_transport.methods import apps, dispatch, listing, method_table, resources_prompts, skills, tool_calls
from mcp_transport.methods.context import Context, SyncContext, ToolCancelled
from mcp_transport.protocol.errors import ErrorCode, InvalidParams, MethodNotFound, ResourceNotFound
from mcp_transport.protocol.jsonrpc import Request
from mcp_transport.methods.registry import Registry, ToolError
from mcp_transport.state.sessions import SessionRecord


class FakeChannel:
    def __init__(self, response=None):
        self.request_id = 41
        self.cancelled = False
        self.response = response or {}
        self.notifications = []
        self.requests = []

    async def notify(self, method, params):
        self.notifications.append((method, params))

    async def request(self, method, params, **_options):
        self.requests.append((method, params))
        return self.response

    async def close_stream(self, retry_ms):
        pass


@pytest.fixture
def reg(monkeypatch):
    fresh = Registry()
    # where dispatch's methods, and the extensions' settings (skills', apps'), read it
    for module in (method_table, listing, tool_calls, resources_prompts, skills, apps):
        monkeypatch.setattr(module, "registry", fresh)
    return fresh


@pytest.fixture
def channel():
    return FakeChannel()


@pytest.fixture
def call(channel):
    return dispatch.Call(session=SessionRecord(id="x" * 32, protocol_version="2025-11-25"), user=None,
                         channel=channel)


def request(method, params=None):
    return Request(id=1, method=method, params=params or {})


async def run(call, method, params=None):
    return await dispatch.dispatch(request(method, params), call)


def text_of(result):
    (block,) = result["content"]
    assert block["type"] == "text"
    return block["text"]


# --- pagination -----------------------------------------------------------------------------

def add_tools(reg, names):
    for name in names:
        reg.tool(lambda: None, name=name)


def walk(items, key):
    """Every page of ``items``, following nextCursor; checks each cursor on the way."""
    pages, params = [], {}
    while True:
        page = dispatch.paginate(items, params, key)
        pages.append([entry["name"] for entry in page[key]])
        if "nextCursor" not in page:
            return pages
        cursor = page["nextCursor"]
        assert isinstance(cursor, str) and cursor != ""
        assert len(pages) <= len(items) + 1, "pagination does not end"
        params = {"cursor": cursor}


@pytest.mark.parametrize("count", [0, 1, 2, 3, 4, 5, 7])
def test_paginate_walk_yields_every_item_once_in_order(reg, count):
    names = [f"tool_{chr(ord('a') + i)}" for i in range(count)][::-1]  # registered out of order
    add_tools(reg, names)
    with override_settings(MCP_TRANSPORT={"PAGE_SIZE": 2}):
        pages = walk(reg.tools, "tools")
    flat = [name for page in pages for name in page]
    assert flat == sorted(names)
    assert all(1 <= len(page) <= 2 for page in pages) or pages == [[]]
    assert len(pages) == max(1, -(-count // 2))  # no empty trailing page


def test_paginate_default_page_size_is_one_page(reg):
    add_tools(reg, [f"t{i:03}" for i in range(100)])
    page = dispatch.paginate(reg.tools, {}, "tools")
    assert len(page["tools"]) == 100
    assert "nextCursor" not in page


def test_paginate_entries_are_descriptions(reg):
    @reg.tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    page = dispatch.paginate(reg.tools, {}, "tools")
    assert page == {"tools": [reg.tools["echo"].describe()]}


def test_cursor_stays_valid_when_items_change(reg):
    add_tools(reg, ["a", "b", "c", "d"])
    with override_settings(MCP_TRANSPORT={"PAGE_SIZE": 2}):
        cursor = dispatch.paginate(reg.tools, {}, "tools")["nextCursor"]
        del reg.tools["b"]
        add_tools(reg, ["bb", "e"])
        page = dispatch.paginate(reg.tools, {"cursor": cursor}, "tools")
    assert [t["name"] for t in page["tools"]] == ["bb", "c"]


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode()


@pytest.mark.parametrize("cursor", [
    "!!bogus",
    b64(b"not json"),
    b64(json.dumps({"after": 5}).encode()),
    b64(json.dumps({"before": "a"}).encode()),
    b64(json.dumps(["a"]).encode()),
    b64(json.dumps("a").encode()),
    b64(b"\xff\xfe"),
    "",
    5,
    {"after": "a"},
])
def test_bogus_cursor_is_invalid_params(reg, cursor):
    add_tools(reg, ["a", "b", "c"])
    with pytest.raises(InvalidParams) as info:
        dispatch.paginate(reg.tools, {"cursor": cursor}, "tools")
    assert info.value.code == ErrorCode.INVALID_PARAMS == -32602


async def test_bogus_cursor_through_dispatch(reg, call):
    add_tools(reg, ["a"])
    with pytest.raises(InvalidParams):
        await run(call, "tools/list", {"cursor": "!!bogus"})


async def test_list_methods_paginate_their_own_items(reg, call):
    add_tools(reg, ["t1", "t2", "t3"])
    reg.resource("test://r1")(lambda: "x")
    reg.resource("test://r2")(lambda: "x")
    reg.resource("test://t/{id}")(lambda id: "x")
    reg.prompt(name="p1")(lambda: "x")
    with override_settings(MCP_TRANSPORT={"PAGE_SIZE": 2}):
        tools = await run(call, "tools/list")
        rest = await run(call, "tools/list", {"cursor": tools["nextCursor"]})
        resources = await run(call, "resources/list")
        templates = await run(call, "resources/templates/list")
        prompts = await run(call, "prompts/list")
    assert [t["name"] for t in tools["tools"]] == ["t1", "t2"]
    assert rest == {"tools": [reg.tools["t3"].describe()]}
    assert [r["uri"] for r in resources["resources"]] == ["test://r1", "test://r2"]
    assert "nextCursor" not in resources
    assert templates == {"resourceTemplates": [reg.templates["test://t/{id}"].describe()]}
    assert prompts == {"prompts": [reg.prompts["p1"].describe()]}


# --- capabilities, initialize, may_send -----------------------------------------------------

def test_capabilities_empty(reg):
    assert dispatch.capabilities() == {"logging": {}}


def test_capabilities_tools(reg):
    add_tools(reg, ["a"])
    assert dispatch.capabilities() == {"logging": {}, "tools": {"listChanged": True}}


def test_capabilities_static_resource(reg):
    reg.resource("test://a")(lambda: "")
    assert dispatch.capabilities() == {"logging": {}, "resources": {"subscribe": True, "listChanged": True}}


def test_capabilities_template_adds_completions(reg):
    reg.resource("test://a/{x}")(lambda x: "")
    assert dispatch.capabilities() == {"logging": {}, "resources": {"subscribe": True, "listChanged": True},
                                       "completions": {}}


def test_capabilities_prompt_adds_completions(reg):
    reg.prompt(lambda: "", name="p")
    assert dispatch.capabilities() == {"logging": {}, "prompts": {"listChanged": True}, "completions": {}}


def test_capabilities_everything(reg):
    add_tools(reg, ["a"])
    reg.resource("test://a")(lambda: "")
    reg.prompt(lambda: "", name="p")
    assert set(dispatch.capabilities()) == {"logging", "tools", "resources", "prompts", "completions"}


ALL_CAPABILITIES = ("logging", "tools", "resources", "prompts", "completions", "tasks", "extensions", "sampling")


@pytest.mark.parametrize("offers", [(), ("tool",), ("background",), ("resource",), ("template",), ("prompt",),
                                    ("tool", "resource", "prompt", "background")])
def test_declares_agrees_with_what_both_eras_declare(reg, offers):
    """Requests ask ``declares`` (cheap) where discover and initialize build ``capabilities()``:
    the two must never disagree."""
    from mcp_transport.eras.modern_2026 import methods as modern_http

    if "tool" in offers:
        add_tools(reg, ["a"])
    if "background" in offers:
        reg.tool(lambda n: n, name="b", background=True)
    if "resource" in offers:
        reg.resource("test://a")(lambda: "")
    if "template" in offers:
        reg.resource("test://a/{x}")(lambda x: "")
    if "prompt" in offers:
        reg.prompt(lambda: "", name="p")
    for declared, declares in ((dispatch.capabilities(), dispatch.declares),
                               (modern_http.capabilities(), modern_http.declares)):
        assert {name for name in ALL_CAPABILITIES if declares(name)} == set(declared)


def test_initialize_result(reg):
    add_tools(reg, ["a"])
    with override_settings(MCP_TRANSPORT={"SERVER_NAME": "n", "SERVER_TITLE": "T", "SERVER_VERSION": "9",
                                          "INSTRUCTIONS": "Be nice."}):
        result = dispatch.initialize_result("2025-11-25")
    assert result == {"protocolVersion": "2025-11-25", "capabilities": dispatch.capabilities(),
                      "serverInfo": {"name": "n", "version": "9", "title": "T"}, "instructions": "Be nice."}


def test_server_info_carries_the_description_website_and_icons(reg):
    icon = {"src": "https://example.com/i.png", "sizes": ["48x48"]}
    with override_settings(MCP_TRANSPORT={"SERVER_NAME": "com.example/n", "SERVER_DESCRIPTION": "Does things.",
                                          "SERVER_WEBSITE_URL": "https://example.com", "SERVER_ICONS": [icon]}):
        info = dispatch.initialize_result("2025-11-25")["serverInfo"]
        assert info == dispatch.server_info()
    assert info == {"name": "com.example/n", "version": dispatch.__version__, "description": "Does things.",
                    "websiteUrl": "https://example.com", "icons": [icon]}


def test_initialize_result_defaults(reg):
    with override_settings(MCP_TRANSPORT={}):
        result = dispatch.initialize_result("2025-06-18")
    assert result["serverInfo"] == {"name": "django-mcp-transport", "version": dispatch.__version__}
    assert "instructions" not in result


def test_may_send(reg):
    @reg.tool
    async def with_ctx(ctx: Context):
        pass

    @reg.tool
    def plain():
        pass

    assert dispatch.may_send(request("tools/call", {"name": "with_ctx"})) is True
    assert dispatch.may_send(request("tools/call", {"name": "plain"})) is False
    assert dispatch.may_send(request("tools/call", {"name": "missing"})) is False
    assert dispatch.may_send(request("tools/call", {})) is False
    assert dispatch.may_send(request("tools/list", {"name": "with_ctx"})) is False
    assert dispatch.may_send(request("ping")) is False


@pytest.mark.parametrize("name", [["with_ctx"], {"a": 1}, 3, None])
def test_may_send_with_a_name_that_is_not_a_string(reg, name):
    # Regression: a list or dict name raised TypeError (unhashable) before any error handling.
    @reg.tool
    async def with_ctx(ctx: Context):
        pass

    assert dispatch.may_send(request("tools/call", {"name": "with_ctx"})) is True
    assert dispatch.may_send(request("tools/call", {"name": name})) is False


# --- dispatch: methods ----------------------------------------------------------------------

async def test_ping(reg, call):
    assert await run(call, "ping") == {}


@pytest.mark.parametrize("method", ["nope", "tools/nope", "initialize", "notifications/initialized", ""])
async def test_unknown_method(reg, call, method):
    add_tools(reg, ["a"])
    with pytest.raises(MethodNotFound) as info:
        await run(call, method)
    assert info.value.code == ErrorCode.METHOD_NOT_FOUND == -32601


@pytest.mark.parametrize("method", ["prompts/list", "prompts/get", "tools/list", "tools/call", "resources/list",
                                    "resources/read", "resources/templates/list", "completion/complete"])
async def test_methods_of_undeclared_features(reg, call, method):
    with pytest.raises(MethodNotFound):
        await run(call, method, {"name": "a", "uri": "test://a"})


async def test_prompts_list_without_prompts_but_with_tools(reg, call):
    add_tools(reg, ["a"])
    with pytest.raises(MethodNotFound):
        await run(call, "prompts/list")


# --- tools/call -----------------------------------------------------------------------------

async def test_call_tool(reg, call):
    @reg.tool
    async def add(a: int, b: int = 1) -> int:
        return a + b

    result = await run(call, "tools/call", {"name": "add", "arguments": {"a": 2, "b": "3"}})
    assert result["structuredContent"] == {"result": 5}
    assert "isError" not in result


async def test_call_tool_without_arguments_key(reg, call):
    @reg.tool
    def hello() -> str:
        return "hello"

    assert await run(call, "tools/call", {"name": "hello"}) == \
        {"content": [{"type": "text", "text": "hello"}], "structuredContent": {"result": "hello"}}


async def test_call_unknown_tool(reg, call):
    add_tools(reg, ["a"])
    with pytest.raises(InvalidParams, match="Unknown tool: b"):
        await run(call, "tools/call", {"name": "b"})


@pytest.mark.parametrize("params", [{}, {"name": ""}, {"name": 3}, {"name": ["a"]}])
async def test_call_tool_bad_name(reg, call, params):
    add_tools(reg, ["a"])
    with pytest.raises(InvalidParams, match='"name" must be a non-empty string'):
        await run(call, "tools/call", params)


async def test_call_tool_arguments_not_an_object(reg, call):
    add_tools(reg, ["a"])
    with pytest.raises(InvalidParams, match='"arguments" must be an object'):
        await run(call, "tools/call", {"name": "a", "arguments": [1]})


async def test_call_tool_bad_arguments_is_error_result(reg, call):
    ran = []

    @reg.tool
    def f(n: int):
        ran.append(n)

    result = await run(call, "tools/call", {"name": "f", "arguments": {"n": "x"}})
    assert result["isError"] is True
    assert text_of(result).startswith("Invalid arguments for tool f: n: Input should be a valid integer")
    assert ran == []


async def test_tool_error_is_error_result_with_message(reg, call):
    @reg.tool
    async def fails():
        raise ToolError("The disk is full.")

    assert await run(call, "tools/call", {"name": "fails"}) == \
        {"content": [{"type": "text", "text": "The disk is full."}], "isError": True}


async def test_client_capability_error_is_error_result(reg, call):
    @reg.tool
    async def asks(ctx: Context):
        await ctx.elicit("?", {})

    result = await run(call, "tools/call", {"name": "asks"})
    assert result["isError"] is True
    assert "elicitation" in text_of(result)


async def test_other_exception_hides_its_message(reg, call, caplog):
    @reg.tool
    def broken():
        raise ValueError("password=hunter2")

    with caplog.at_level(logging.ERROR, logger="mcp_transport.methods.dispatch"):
        result = await run(call, "tools/call", {"name": "broken"})
    assert result["isError"] is True
    assert "hunter2" not in json.dumps(result)
    assert text_of(result) == "Tool broken failed: ValueError."
    # ...the details stay in the logs.
    (record,) = [r for r in caplog.records if r.name == "mcp_transport.methods.dispatch"]
    assert record.exc_info and "hunter2" in str(record.exc_info[1])


async def test_tool_cancelled_propagates(reg, call, channel):
    @reg.tool
    async def long(ctx: Context):
        ctx.check_cancelled()

    channel.cancelled = True
    with pytest.raises(ToolCancelled):
        await run(call, "tools/call", {"name": "long"})


async def test_sync_tool_runs_in_worker_thread(reg, call):
    seen = []

    @reg.tool
    def where() -> str:
        seen.append(threading.current_thread())
        return "ok"

    result = await run(call, "tools/call", {"name": "where"})
    assert result["structuredContent"] == {"result": "ok"}
    assert len(seen) == 1
    assert seen[0] is not threading.main_thread()
    assert seen[0] is not threading.current_thread()


async def test_async_tool_runs_on_the_loop(reg, call):
    seen = []

    @reg.tool
    async def where():
        seen.append(threading.current_thread())

    await run(call, "tools/call", {"name": "where"})
    assert seen == [threading.current_thread()]


async def test_async_tool_gets_context(reg, call, channel):
    call.session.client_capabilities = {"roots": {}}
    call.session.log_level = "warning"
    call.user = "the-user"
    got = {}

    @reg.tool
    async def probe(ctx: Context, n: int = 0) -> str:
        got["ctx"] = ctx
        await ctx.report_progress(1, 2)
        await ctx.info("below the level")
        await ctx.error("sent")
        return "done"

    result = await run(call, "tools/call", {"name": "probe", "arguments": {"n": 1},
                                            "_meta": {"progressToken": "pt"}})
    assert result["structuredContent"] == {"result": "done"}
    ctx = got["ctx"]
    assert type(ctx) is Context
    assert (ctx.session_id, ctx.request_id, ctx.user) == ("x" * 32, 41, "the-user")
    assert ctx.client_capabilities == {"roots": {}}
    assert channel.notifications == [
        ("notifications/progress", {"progressToken": "pt", "progress": 1, "total": 2}),
        ("notifications/message", {"level": "error", "data": "sent"}),
    ]


async def test_sync_tool_gets_sync_context(reg, call, channel):
    got = {}

    @reg.tool
    def probe(ctx: Context) -> str:
        got["ctx"] = ctx
        ctx.report_progress(1)
        ctx.info("hello")  # a helper built on log(): used to fail in SyncContext
        return "done"

    result = await run(call, "tools/call", {"name": "probe", "_meta": {"progressToken": 5}})
    assert result == {"content": [{"type": "text", "text": "done"}], "structuredContent": {"result": "done"}}
    assert type(got["ctx"]) is SyncContext
    assert channel.notifications == [
        ("notifications/progress", {"progressToken": 5, "progress": 1}),
        ("notifications/message", {"level": "info", "data": "hello"}),
    ]


async def test_context_without_progress_token(reg, call, channel):
    @reg.tool
    async def probe(ctx: Context):
        await ctx.report_progress(1)

    await run(call, "tools/call", {"name": "probe", "_meta": "not an object"})
    assert channel.notifications == []


async def test_client_cannot_pass_the_context_argument(reg, call):
    got = {}

    @reg.tool
    async def probe(ctx: Context):
        got["ctx"] = ctx

    await run(call, "tools/call", {"name": "probe", "arguments": {"ctx": "forged"}})
    assert isinstance(got["ctx"], Context)


# --- completion/complete --------------------------------------------------------------------

def complete_params(name="greet", value="", argument="name", context=None):
    params = {"ref": {"type": "ref/prompt", "name": name}, "argument": {"name": argument, "value": value}}
    if context is not None:
        params["context"] = {"arguments": context}
    return params


async def test_completion_caps_values_at_100(reg, call):
    reg.prompt(lambda name: "", name="greet")

    @reg.completion(prompt="greet")
    def many(argument, value, context):
        return (f"{value}{i}" for i in range(150))

    result = await run(call, "completion/complete", complete_params(value="v"))
    completion = result["completion"]
    assert len(completion["values"]) == 100
    assert completion["values"][0] == "v0" and completion["values"][-1] == "v99"
    assert completion["total"] == 150
    assert completion["hasMore"] is True


@pytest.mark.parametrize("count, has_more", [(0, False), (3, False), (100, False), (101, True)])
async def test_completion_has_more(reg, call, count, has_more):
    reg.prompt(lambda name: "", name="greet")
    reg.completion(prompt="greet")(lambda argument, value, context: [str(i) for i in range(count)])
    completion = (await run(call, "completion/complete", complete_params()))["completion"]
    assert completion == {"values": [str(i) for i in range(min(count, 100))], "total": count,
                          "hasMore": has_more}


async def test_completion_passes_argument_value_and_context(reg, call):
    reg.prompt(lambda name, style="": "", name="greet")
    seen = []

    @reg.completion(prompt="greet")
    async def completer(argument, value, context):
        seen.append((argument, value, context))
        return ["x"]

    await run(call, "completion/complete", complete_params(argument="style", value="fo", context={"name": "A"}))
    assert seen == [("style", "fo", {"name": "A"})]


async def test_completion_for_resource_template(reg, call):
    reg.resource("test://t/{id}")(lambda id: "")
    reg.completion(resource_template="test://t/{id}")(lambda argument, value, context: ["1", "2"])
    params = {"ref": {"type": "ref/resource", "uri": "test://t/{id}"}, "argument": {"name": "id", "value": ""}}
    assert (await run(call, "completion/complete", params))["completion"]["values"] == ["1", "2"]


async def test_completion_without_completer_is_empty(reg, call):
    reg.prompt(lambda name: "", name="greet")
    assert await run(call, "completion/complete", complete_params(name="other")) == \
        {"completion": {"values": [], "total": 0, "hasMore": False}}


@pytest.mark.parametrize("params", [
    {},
    {"ref": {"type": "ref/tool", "name": "greet"}, "argument": {"name": "a"}},
    {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {}},
    {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": 1}},
    {"ref": "greet", "argument": {"name": "a"}},
    # Regression: an unhashable name or uri raised TypeError (an internal error) instead.
    {"ref": {"type": "ref/prompt", "name": ["greet"]}, "argument": {"name": "a"}},
    {"ref": {"type": "ref/resource", "uri": {"u": 1}}, "argument": {"name": "a"}},
])
async def test_completion_bad_params(reg, call, params):
    reg.prompt(lambda name: "", name="greet")
    with pytest.raises(InvalidParams):
        await run(call, "completion/complete", params)


# --- prompts/get ----------------------------------------------------------------------------

async def test_prompts_get(reg, call):
    @reg.prompt
    def greet(name, style="plain"):
        """Greeting."""
        return f"Hello {name} ({style})"

    result = await run(call, "prompts/get", {"name": "greet", "arguments": {"name": "Ada", "unknown": "x"}})
    assert result == {"description": "Greeting.",
                      "messages": [{"role": "user", "content": {"type": "text", "text": "Hello Ada (plain)"}}]}


async def test_prompts_get_missing_required_argument(reg, call):
    ran = []

    @reg.prompt
    def greet(name, place, style="plain"):
        ran.append(1)
        return ""

    with pytest.raises(InvalidParams) as info:
        await run(call, "prompts/get", {"name": "greet", "arguments": {"style": "x"}})
    assert info.value.message == "Missing required arguments for prompt greet: name, place."
    assert ran == []


async def test_prompts_get_unknown_prompt(reg, call):
    reg.prompt(lambda: "", name="greet")
    with pytest.raises(InvalidParams, match="Unknown prompt: other"):
        await run(call, "prompts/get", {"name": "other"})


# --- resources/read -------------------------------------------------------------------------

async def test_resources_read_static(reg, call):
    reg.resource("test://static", mime_type="text/plain")(lambda: "hello")
    assert await run(call, "resources/read", {"uri": "test://static"}) == \
        {"contents": [{"uri": "test://static", "mimeType": "text/plain", "text": "hello"}]}


async def test_resources_read_template(reg, call):
    @reg.resource("test://template/{id}/data", mime_type="application/json")
    async def data(id):
        return {"uri": f"test://template/{id}/data", "text": json.dumps({"id": id})}

    result = await run(call, "resources/read", {"uri": "test://template/123/data"})
    assert result == {"contents": [{"uri": "test://template/123/data", "text": '{"id": "123"}'}]}


async def test_resources_read_unknown_uri(reg, call):
    reg.resource("test://template/{id}/data")(lambda id: "")
    with pytest.raises(ResourceNotFound) as info:
        await run(call, "resources/read", {"uri": "test://template/a/b/data"})
    assert info.value.code == ErrorCode.RESOURCE_NOT_FOUND == -32002
    assert info.value.data == {"uri": "test://template/a/b/data"}


async def test_resources_read_needs_uri(reg, call):
    reg.resource("test://a")(lambda: "")
    with pytest.raises(InvalidParams):
        await run(call, "resources/read", {})


# --- run_sync_or_async ----------------------------------------------------------------------

async def test_run_sync_or_async():
    async def a(x):
        return x + 1

    def s(x):
        return threading.current_thread(), x + 2

    assert await dispatch.run_sync_or_async(a, (1,)) == 2
    thread, value = await dispatch.run_sync_or_async(s, kwargs={"x": 1})
    assert value == 3 and thread is not threading.current_thread()


async def test_client_request_error_is_error_result(reg, call):
    from mcp_transport.methods.context import ClientRequestError

    class RefusingChannel(FakeChannel):
        async def request(self, method, params, **_options):
            raise ClientRequestError(method, {"code": -1, "message": "User rejected sampling"})

    call.channel = RefusingChannel()
    call.session.client_capabilities = {"sampling": {}}

    @reg.tool
    async def asks(ctx: Context):
        await ctx.sample(["hi"], max_tokens=5)

    assert await run(call, "tools/call", {"name": "asks"}) == {"content": [{
        "type": "text", "text": "The client answered sampling/createMessage with an error: User rejected sampling"}],
        "isError": True}
