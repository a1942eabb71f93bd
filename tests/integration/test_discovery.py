"""Issue 41: "search" discovery on a real daphne with MCP_AUTH=on, in both eras. The staff
user's tools/list shrinks to the search (under a tenth of the whole list's bytes); search_tools
finds what the caller may use and nothing else; call_tool runs the named tool exactly as its
direct call does: the same refusals, scopes, rate window, background job, question and record."""
import json
import secrets
import time

import pytest

from mcp_transport.testing import HttpClient, ModernClient
from tests.integration.test_auth import manage, new_token
from tests.integration.test_modern_http import next_message, open_listen
from tests.integration.waiting import eventually

STAFF = "discovery-staff"
SUPERUSER = ("from django.contrib.auth.models import User; "
             f"User.objects.filter(username={STAFF!r}).exists() or "
             f"User.objects.create_superuser({STAFF!r}, 'staff@example.com', {secrets.token_urlsafe(12)!r})")


@pytest.fixture(scope="module")
def search_server(start_server):
    return start_server(MCP_AUTH="on", MCP_TOOL_DISCOVERY="search")


@pytest.fixture(scope="module")
def staff(server_env):
    """A superuser's token with every scope: the whole catalog."""
    manage(server_env, "shell", "-c", SUPERUSER)
    return new_token(server_env, STAFF, "--scope", "mcp reports")


@pytest.fixture(scope="module")
def nobody(server_env):
    """A user with no permission and the "mcp" scope only."""
    return new_token(server_env, f"nobody-{secrets.token_hex(3)}")


def legacy(server, token) -> HttpClient:
    client = HttpClient(server.url, token=token)
    client.initialize()
    return client


def modern(server, token, **options) -> ModernClient:
    client = ModernClient(server.url, **options)
    client.token = token
    return client


def both(server, token):
    """(a 2025-11-25 session's ``call``, a 2026-07-28 client's): each returns the JSON-RPC reply."""
    session, stateless = legacy(server, token), modern(server, token)
    return session.call, lambda method, params=None: stateless.post(method, params).json


def list_bytes(client) -> tuple:
    """(the bytes of every page of tools/list, the tools listed)."""
    total, count, params = 0, 0, {}
    while True:
        reply = client.post("tools/list", params) if isinstance(client, ModernClient) else \
            client.request("POST", client.message("tools/list", params))
        assert reply.status == 200, reply.body
        total, count = total + len(reply.body), count + len(reply.json["result"]["tools"])
        cursor = reply.json["result"].get("nextCursor")
        if cursor is None:
            return total, count
        params = {"cursor": cursor}


def found(call, query, limit=5) -> list:
    reply = call("tools/call", {"name": "search_tools", "arguments": {"query": query, "limit": limit}})
    result = reply["result"]
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    return [tool["name"] for tool in result["structuredContent"]["tools"]]


def test_the_staff_users_list_is_under_a_tenth_of_the_whole_in_both_eras(auth_server, search_server, staff):
    sizes = {}
    for era, make in (("2025-11-25", legacy), ("2026-07-28", modern)):
        whole, small = list_bytes(make(auth_server, staff)), list_bytes(make(search_server, staff))
        sizes[era] = (whole, small)
        assert small[0] * 10 < whole[0], sizes
    print(f"tools/list (bytes, tools) of the staff user, whole and search: {sizes}")
    listed = modern(search_server, staff).post("tools/list").json["result"]
    assert [tool["name"] for tool in listed["tools"]] == ["call_tool", "search_tools"]
    assert listed["cacheScope"] == "private"


def test_search_finds_what_the_caller_may_use_and_nothing_else(search_server, staff, nobody):
    for call in both(search_server, staff):
        assert "count_users" in found(call, "how many users are there", 3)
        assert "sales_report" in found(call, "sales report for a day", 3)
        # The meant tool in the first three (the example's book_editor, an app, may come first).
        assert {"book_update", "shelf_update"} & set(found(call, "change a book's title", 3))
        # An app-only tool (its view's, _meta.ui.visibility ["app"]) is not the model's to find.
        assert "book_retitle" not in found(call, "retitle a book change its title", 50)
    for call in both(search_server, nobody):
        for query in ("how many users are there", "sales report for a day", "users count report reports"):
            assert {"count_users", "sales_report"}.isdisjoint(found(call, query, 50))
        # Without the library's permissions, none of its tools, whatever it asks.
        for query in ("change a book's title", "book", "author delete", "list books shelf publish"):
            library = [name for name in found(call, query, 50) if name.split("_")[0] in ("book", "author", "shelf")]
            assert library == [], (query, library)
    searched = modern(search_server, staff).post("tools/call", {"name": "search_tools",
                                                                "arguments": {"query": "who is the caller"}}).json
    assert searched["result"]["cacheScope"] == "private", searched


def test_call_tool_runs_the_tool_as_its_direct_call_does(search_server, staff, nobody, celery_worker):
    for call in both(search_server, staff):
        direct = call("tools/call", {"name": "whoami", "arguments": {}})["result"]
        assert call("tools/call", {"name": "call_tool", "arguments": {"name": "whoami"}})["result"] == direct
        # A background tool: a worker runs it for the same user.
        job = call("tools/call", {"name": "call_tool", "arguments": {"name": "whoami_job", "arguments": {}}})
        assert STAFF in job["result"]["content"][0]["text"], job
    for call in both(search_server, nobody):
        # A tool it may not use: as unknown as one that does not exist, called either way.
        refused = call("tools/call", {"name": "call_tool", "arguments": {"name": "count_users"}})["error"]
        assert refused == call("tools/call", {"name": "count_users", "arguments": {}})["error"]
        assert refused["message"] == "Unknown tool: count_users."


def test_call_tool_reports_the_tools_progress(search_server, staff):
    session = legacy(search_server, staff)
    message = session.message("tools/call", {"name": "call_tool", "_meta": {"progressToken": "p"},
                                             "arguments": {"name": "slow_progress",
                                                           "arguments": {"steps": 3, "interval_ms": 1}}})
    sent = list(session.stream("POST", message).messages())
    progress = [m["params"]["progress"] for m in sent if m.get("method") == "notifications/progress"
                and m["params"]["progressToken"] == "p"]
    assert progress == [1, 2, 3] and "result" in sent[-1], sent


def test_call_tool_of_a_task_tool_is_the_same_task(search_server, staff, celery_worker):
    """2025-11-25 tasks: a plain call of a tool that requires a task is -32601 either way; a
    task-augmented call_tool creates the tool's task, whose result is the tool's."""
    session = legacy(search_server, staff)
    through = {"name": "call_tool", "arguments": {"name": "report_job", "arguments": {"rows": 2}}}
    assert session.call("tools/call", through)["error"] == \
        session.call("tools/call", {"name": "report_job", "arguments": {"rows": 2}})["error"]
    task = session.call("tools/call", {**through, "task": {}})["result"]["task"]
    assert session.call("tasks/result", {"taskId": task["taskId"]})["result"]["content"][0]["text"] == "2 rows"


def test_a_tool_needing_a_scope_is_403_through_call_tool_too(search_server, nobody):
    client = legacy(search_server, nobody)
    for params in ({"name": "sales_report", "arguments": {"day": "d"}},
                   {"name": "call_tool", "arguments": {"name": "sales_report", "arguments": {"day": "d"}}}):
        reply = client.request("POST", client.message("tools/call", params))
        assert reply.status == 403 and "insufficient_scope" in reply.headers["www-authenticate"]


def test_call_tool_spends_the_tools_own_rate_window_and_is_recorded_as_it(search_server, server_env):
    user = f"rated-{secrets.token_hex(3)}"
    token = new_token(server_env, user)
    session, stateless = legacy(search_server, token), modern(search_server, token)
    through = {"name": "call_tool", "arguments": {"name": "rationed_echo", "arguments": {"text": "x"}}}
    for send in (session.call, lambda m, p: stateless.post(m, p).json):  # rationed_echo: 3 an hour
        assert send("tools/call", through)["result"]["structuredContent"] == {"result": "x"}
    assert session.call("tools/call", {"name": "rationed_echo", "arguments": {"text": "x"}})["result"]
    reply = stateless.post("tools/call", through)
    assert reply.status == 429 and "rationed_echo" in reply.json["error"]["message"], reply.body
    message = session.message("tools/call", through)
    assert session.request("POST", message).status == 429

    def recorded():
        code = ("from mcp_transport.models import McpCall; from django.contrib.auth.models import User; "
                f"key = 'user:%s' % User.objects.get(username={user!r}).pk; "
                "print(sorted(McpCall.objects.filter(principal=key, method='tools/call').values_list('target', "
                "flat=True)))")
        return manage(server_env, "shell", "-c", code)
    targets = eventually(lambda: _five(recorded()))
    assert "call_tool" not in targets


def _five(printed: str) -> str:
    last = printed.strip().splitlines()[-1]
    assert last.count("rationed_echo") == 5, last
    return last


def test_a_question_through_call_tool_is_the_tools_question(search_server, staff):
    client = modern(search_server, staff, capabilities={"elicitation": {}})
    params = {"name": "call_tool", "arguments": {"name": "test_input_required_result_elicitation"}}
    asked = client.post("tools/call", params).json["result"]
    assert asked["resultType"] == "input_required" and "user_name" in asked["inputRequests"], asked
    answer = {"user_name": {"action": "accept", "content": {"name": "Ada"}}}
    done = client.post("tools/call", {**params, "requestState": asked.get("requestState"), "inputResponses": answer})
    assert done.json["result"]["content"][0]["text"] == "Hello, Ada!", done.body


@pytest.mark.parametrize("params", [
    {"name": "search_tools", "arguments": {"query": ""}},
    {"name": "search_tools", "arguments": {"query": "x" * 10_240}},
    {"name": "search_tools", "arguments": {"query": "book", "limit": 0}},
    {"name": "search_tools", "arguments": {"query": "book", "limit": 1000}},
    {"name": "call_tool", "arguments": {"name": "call_tool", "arguments": {}}},
    {"name": "call_tool", "arguments": {"name": "search_tools", "arguments": {"query": "x"}}},
    {"name": "call_tool", "arguments": {"name": "echo", "arguments": "text"}},
    {"name": "call_tool", "arguments": "echo"},
])
def test_bad_input_is_invalid_params_in_one_sentence(search_server, staff, params):
    for call in both(search_server, staff):
        error = call("tools/call", params)["error"]
        assert error["code"] == -32602 and error["message"].endswith(".") and ". " not in error["message"], error


# -- operators: the catalog, and a tool switched off at runtime on every process ------------------

CATALOG = "/admin/mcp_transport/mcpsession/tools/"


_SWITCHED = f"mcpswitch{secrets.token_hex(3)}"
SWITCHED_ENV = {"MCP_KEY_PREFIX": _SWITCHED, "CELERY_QUEUE": _SWITCHED, "MCP_AUTH": "on", "MCP_TOOL_DISCOVERY": "search"}


@pytest.fixture(scope="module")
def switched_pair(start_server):
    """Two processes with a Redis key prefix of their own: a switch here reaches no other test."""
    return start_server(**SWITCHED_ENV), start_server(**SWITCHED_ENV)


def offered(server, token, name) -> list:
    """Where ``name`` shows in each era: searched for, called directly, called through call_tool."""
    seen = []
    for call in both(server, token):
        seen.append(name in found(call, "repeat my text back", 50))
        for params in ({"name": name, "arguments": {"text": "a b"}},
                       {"name": "call_tool", "arguments": {"name": name, "arguments": {"text": "a b"}}}):
            reply = call("tools/call", params)
            seen.append("result" in reply or reply["error"]["message"] != f"Unknown tool: {name}.")
    return seen


def test_an_operator_switches_a_tool_off_and_on_again_on_every_process(switched_pair, staff, admin_login,
                                                                       server_env, start_server):
    from tests.integration.test_admin import Admin

    first, second = switched_pair
    admin = Admin(first, admin_login)
    page = admin.page(CATALOG, user=STAFF)
    assert "<code>echo</code>" in page and f"Found by {STAFF}" in page
    assert all(offered(second, staff, "echo"))
    # A 2026-07-28 listen stream on the other process hears each switch (the sessions' GET streams
    # hear it as test_streams.py's list_changed test shows).
    changes, _ack = open_listen(modern(second, staff), {"toolsListChanged": True}, "catalog")
    for on, expected in (("0", False), ("1", True)):
        switched = time.monotonic()
        admin.post(CATALOG, {"tool": "echo", "on": on})
        assert next_message(changes)["method"] == "notifications/tools/list_changed"
        for server in (first, second):
            eventually(lambda server=server: _all_are(offered(server, staff, "echo"), expected), deadline=10)
        print(f"echo switched {'on' if expected else 'off'}: from the admin's POST to both processes "
              f"refusing it (or serving it again): {time.monotonic() - switched:.3f} s")
        if not expected:  # a process that starts now reads the set before it serves its first request
            _all_are(offered(start_server(**SWITCHED_ENV), staff, "echo"), False)

    def audited():
        code = ("from mcp_transport.models import McpCall; print([(c.target, c.arguments) for c in McpCall.objects"
                ".filter(method='admin/tools/switch', target='echo').order_by('started_at')][-2:])")
        return manage(server_env, "shell", "-c", code).strip().splitlines()[-1]
    assert audited() == "[('echo', {'on': False}), ('echo', {'on': True})]"


def _all_are(seen: list, expected: bool) -> None:
    assert seen == [expected] * len(seen), seen


def test_the_catalog_needs_a_permission_of_the_app_and_a_switch_the_superuser(switched_pair, server_env):
    from tests.integration.test_admin import Admin
    from tests.integration.test_admin_hardening import make_staff

    first, _second = switched_pair
    assert Admin(first, make_staff(server_env, "staff-no-mcp-catalog")).get(CATALOG)[0] == 403
    viewer = Admin(first, make_staff(server_env, "staff-catalog", "view_mcpcall"))
    status, html = viewer.get(CATALOG)
    assert status == 200 and "<code>echo</code>" in html and "Switch off" not in html
    status, _html = viewer.send(CATALOG, {"tool": "echo", "on": "0", "csrfmiddlewaretoken": viewer.csrf})
    assert status == 403
