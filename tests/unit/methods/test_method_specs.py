"""Each MCP method's facts are declared once, with its handler (methods/specs.py), and every
era reads them from its table: what the parallel tables of dispatch.py, the 2026-07-28 era and
protocol/mrtr.py used to say, per method, is what the declarations say now."""
from mcp_transport.eras.modern_2026 import methods as modern_http
from mcp_transport.methods import dispatch
from mcp_transport.methods.specs import MethodSpec, MethodTable
from mcp_transport.protocol import modern
from mcp_transport.protocol.jsonrpc import Request

#: The spec's lists: "InputRequiredResult ... is allowed only on tools/call, prompts/get and
#: resources/read"; "Mcp-Name ... the value of params.name or params.uri" (taskId for tasks).
ROUND_TRIP = {"tools/call", "prompts/get", "resources/read"}
MCP_NAME = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
            "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId",
            "tasks/stream": "taskId"}


def test_the_calls_are_the_methods_that_run_the_projects_code_or_wait_for_a_task():
    counted = {name for name, spec in dispatch.METHODS.items() if spec.counts_as_call}
    assert counted == {"tools/call", "resources/read", "prompts/get", "completion/complete", "tasks/result"}


def test_capabilities_of_the_2025_methods():
    capability = {name: spec.capability for name, spec in dispatch.METHODS.items()}
    assert capability["ping"] is None
    assert {capability[name] for name in capability if name.startswith("tasks/")} == {"tasks"}
    # The skills extension's methods, resources/directory/read among them ("clients MUST NOT call
    # resources/directory/read against a server that has not declared directoryRead: true").
    skills = {"skills/list", "skills/get", "resources/directory/read"}
    assert {capability[name] for name in skills} == {"skills"}
    for prefix, declared in {"tools/": "tools", "resources/": "resources", "prompts/": "prompts",
                             "completion/": "completions", "logging/": "logging"}.items():
        assert {capability[name] for name in capability if name.startswith(prefix) and name not in skills} == \
            {declared}, prefix


def test_the_2026_era_derives_its_table_and_knows_its_targets():
    methods = modern_http.METHODS
    assert not set(methods) & modern.REMOVED_METHODS
    assert {name for name, spec in methods.items() if spec.round_trip} == ROUND_TRIP
    assert {name: spec.target for name, spec in methods.items() if spec.target} == MCP_NAME
    assert methods["tools/list"].handler is modern_http.tools_list
    assert methods["tools/call"].handler is dispatch.tools_call
    assert "tasks/result" not in methods and "server/discover" in methods


def test_scopes_calls_log_and_span_read_the_declared_target():
    assert dispatch.target_of(Request(id=1, method="resources/unsubscribe", params={"uri": "x://y"})) == \
        ("resource", "x://y")
    assert dispatch.target_spec(Request(id=1, method="resources/unsubscribe", params={"uri": "x://y"})) is None
    # A tool call that names no tool (or not with a string) is still a tool call: the span says so.
    assert dispatch.target_of(Request(id=1, method="tools/call", params={"name": ["a list"]})) == ("tool", "")
    assert dispatch.target_of(Request(id=1, method="nope", params={"name": "x"})) is None


def test_adding_a_method_is_one_declaration():
    table = MethodTable()

    @table.method("things/count", capability="things", counts_as_call=True, target="name", target_kind="tool")
    async def count(params, call):
        return {"count": 1}

    spec = table["things/count"]
    assert isinstance(spec, MethodSpec) and spec.handler is count and spec.counts_as_call
    assert spec.target_of({"name": "n"}) == "n" and spec.may_send({}) is False
