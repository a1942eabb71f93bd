"""The 2026-07-28 era over raw HTTP on real daphne processes (spec-checklist §3): stateless
requests on the same /mcp as the sessions of 2025-11-25, routed per request."""
import base64
import json
from unittest.mock import ANY
import os
import subprocess
import sys
import threading
import time

import pytest

from mcp_transport.testing import HttpClient, ModernClient

TIMEOUT = 10
JSON = "application/json"
SSE = "text/event-stream"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"


@pytest.fixture
def modern(mcp_server):
    return ModernClient(mcp_server.url)


def error_of(reply, status, code, request_id):
    assert reply.status == status, (reply.status, reply.body)
    assert reply.content_type == JSON
    body = reply.json
    assert body["error"]["code"] == code, body
    assert body["id"] == request_id, body  # "Every error on a well-formed request carries the request id"
    assert body["error"]["message"]
    return body["error"]


def result_of(reply):
    assert reply.status == 200, (reply.status, reply.body)
    body = reply.json
    assert "error" not in body, body
    result = body["result"]
    assert result["resultType"] == "complete"
    assert result["_meta"][SERVER_INFO]["name"]
    return result


# --- server/discover -------------------------------------------------------------------------------

def test_discover_is_stateless_and_declares_what_the_handlers_serve(modern):
    reply = modern.post("server/discover")
    result = result_of(reply)
    assert "mcp-session-id" not in reply.headers  # "do not mint or echo session IDs"
    assert result["supportedVersions"] == ["2026-07-28"]
    assert {"tools", "resources", "prompts"} <= set(result["capabilities"])
    assert "tasks" not in result["capabilities"]  # an extension in this era, not a core capability
    assert isinstance(result["ttlMs"], int) and result["ttlMs"] >= 0
    assert result["cacheScope"] in ("public", "private")


def test_a_session_id_on_a_modern_request_routes_it_to_the_legacy_session_path(modern):
    message = modern.modern_message("tools/list")
    reply = modern.request("POST", message, {**modern.modern_headers(message), "Mcp-Session-Id": "nope"},
                           session=False, timeout=TIMEOUT)
    assert reply.status == 404  # the legacy answer for an unknown session, never a modern error


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_get_and_delete_without_a_session_in_the_modern_era_are_405(modern, method):
    reply = modern.request(method, None, {"MCP-Protocol-Version": "2026-07-28", "Accept": SSE}, session=False,
                           timeout=TIMEOUT)
    assert reply.status == 405 and reply.headers["allow"] == "POST"


# --- the ladder: _meta, headers, version, method, capabilities ---------------------------------------

@pytest.mark.parametrize("meta", [
    None,
    {"io.modelcontextprotocol/clientCapabilities": {}},
    {"io.modelcontextprotocol/protocolVersion": "2026-07-28"},
], ids=["no-meta", "no-protocol-version", "no-client-capabilities"])
def test_missing_required_meta_is_400_invalid_params(modern, meta):
    message = {"jsonrpc": "2.0", "id": 101, "method": "server/discover", "params": {} if meta is None else {"_meta": meta}}
    reply = modern.request("POST", message, modern.modern_headers(message), session=False, timeout=TIMEOUT)
    error_of(reply, 400, -32602, 101)


def test_client_info_is_optional(modern):
    meta = modern.meta()
    del meta["io.modelcontextprotocol/clientInfo"]
    message = {"jsonrpc": "2.0", "id": 105, "method": "server/discover", "params": {"_meta": meta}}
    result_of(modern.request("POST", message, modern.modern_headers(message), session=False, timeout=TIMEOUT))


def test_version_header_differing_from_the_body_is_header_mismatch(modern):
    reply = modern.post("server/discover", {"_meta": {"io.modelcontextprotocol/protocolVersion": "v999"}},
                        request_id=302)
    error_of(reply, 400, -32020, 302)


def test_unsupported_version_lists_the_supported_ones_and_echoes_the_request(modern):
    reply = modern.post("server/discover", {"_meta": {"io.modelcontextprotocol/protocolVersion": "v999"}},
                        headers={"MCP-Protocol-Version": "v999"}, request_id=301)
    error = error_of(reply, 400, -32022, 301)
    assert error["data"] == {"supported": ["2026-07-28"], "requested": "v999"}


@pytest.mark.parametrize("method", ["initialize", "ping", "logging/setLevel", "resources/subscribe",
                                    "resources/unsubscribe", "unknown/method"])
def test_removed_and_unknown_methods_are_404_method_not_found(modern, method):
    error_of(modern.post(method, request_id=500), 404, -32601, 500)


@pytest.mark.parametrize("headers", [{"Mcp-Method": "prompts/list"}, {"Mcp-Method": None}, {"Mcp-Method": "TOOLS/LIST"}])
def test_mcp_method_must_match_the_body(modern, headers):
    error_of(modern.post("tools/list", headers=headers, request_id=9), 400, -32020, 9)


@pytest.mark.parametrize("name, ok", [("bar", False), (None, False), ("  echo  ", True)])
def test_mcp_name_must_match_params_name(modern, name, ok):
    reply = modern.post("tools/call", {"name": "echo", "arguments": {"text": "x"}}, headers={"Mcp-Name": name},
                        request_id=10)
    if ok:
        result_of(reply)
    else:
        error_of(reply, 400, -32020, 10)


def test_undeclared_client_capability_is_400_with_the_required_capabilities(mcp_server):
    reply = ModernClient(mcp_server.url).post("tools/call", {"name": "test_missing_capability"}, request_id=401)
    error = error_of(reply, 400, -32021, 401)
    assert error["data"]["requiredCapabilities"] == {"sampling": {}}
    declared = ModernClient(mcp_server.url, capabilities={"sampling": {}})
    assert result_of(declared.post("tools/call", {"name": "test_missing_capability"})).get("isError") is not True


def b64(text):
    return f"=?base64?{base64.b64encode(text.encode()).decode()}?="


@pytest.mark.parametrize("value, header, ok", [
    ("Hello", b64("Hello"), True),
    ("Grüße", b64("Grüße"), True),
    ("SGVsbG8=", "SGVsbG8=", True),                 # no =?base64?...?= wrapper: a literal
    ("Hello", "=?base64?SGVsbG8?=", False),          # invalid padding
    ("Hello", "=?base64?SGVs!!!bG8=?=", False),      # outside the alphabet
    ("Hello", "Bye", False),
    ("Hello", None, False),                          # the body names a value the header must carry
])
def test_mcp_param_headers_are_decoded_and_compared(modern, value, header, ok):
    reply = modern.post("tools/call", {"name": "test_x_mcp_header", "arguments": {"region": value}},
                        headers={"Mcp-Param-Region": header}, request_id=200)
    if ok:
        assert result_of(reply)["content"][0]["text"] == f"region={value}"
    else:
        error_of(reply, 400, -32020, 200)


# --- results: resultType, serverInfo, caching hints, resources ------------------------------------------

@pytest.mark.parametrize("method", ["tools/list", "prompts/list", "resources/list", "resources/templates/list",
                                    "skills/list"])
def test_list_results_carry_caching_hints(modern, method):
    result = result_of(modern.post(method))
    assert isinstance(result["ttlMs"], int) and result["cacheScope"] in ("public", "private")


def test_tools_list_has_no_task_support_fields(modern):
    tools = result_of(modern.post("tools/list"))["tools"]
    assert tools and all("execution" not in tool for tool in tools)


def test_resources_read_carries_caching_hints(modern):
    result = result_of(modern.post("resources/read", {"uri": "test://static-text"}))
    assert result["contents"][0]["text"] and "ttlMs" in result and "cacheScope" in result


def test_an_unknown_resource_is_invalid_params_with_its_uri(modern):
    error = error_of(modern.post("resources/read", {"uri": "test://nothing-here"}, request_id=77), 200, -32602, 77)
    assert error["data"] == {"uri": "test://nothing-here"}  # never -32002 in this era


def test_tool_results_carry_result_type_and_server_info(modern):
    result = result_of(modern.post("tools/call", {"name": "echo", "arguments": {"text": "Hello, 世界"}}))
    assert result["structuredContent"] == {"result": "Hello, 世界"}


# --- streams: progress, logs ---------------------------------------------------------------------------

def stream_messages(stream):
    assert stream.status == 200
    assert stream.headers["content-type"].startswith(SSE)
    messages = stream.messages(timeout=TIMEOUT)
    assert b"\nid:" not in b"\n" + stream.raw and not stream.raw.startswith(b"id:")  # no event ids in 2026
    return messages


def test_progress_goes_on_the_call_s_own_stream_before_its_result(modern):
    stream = modern.open("tools/call", {"name": "slow_progress", "arguments": {"steps": 3, "interval_ms": 1},
                                        "_meta": {"progressToken": "p1"}})
    messages = stream_messages(stream)
    progress = [m["params"]["progress"] for m in messages if m.get("method") == "notifications/progress"]
    assert progress == [1, 2, 3]
    assert messages[-1]["result"]["content"][0]["text"] == "done 3"
    assert messages[-1]["result"]["resultType"] == "complete"


def test_no_log_messages_without_a_log_level(modern):
    reply = modern.post("tools/call", {"name": "test_tool_with_logging"})
    # Nothing was sent before the result, so it is plain JSON: no notifications/message at all.
    assert reply.content_type == JSON
    result_of(reply)


def test_log_messages_at_or_above_the_request_s_log_level(mcp_server):
    stream = ModernClient(mcp_server.url, log_level="info").open("tools/call", {"name": "test_tool_with_logging"})
    logs = [m for m in stream_messages(stream) if m.get("method") == "notifications/message"]
    assert [m["params"]["data"] for m in logs] == ["Tool execution started", "Tool processing data",
                                                   "Tool execution completed"]
    quiet = ModernClient(mcp_server.url, log_level="error").post("tools/call", {"name": "test_tool_with_logging"})
    assert quiet.content_type == JSON  # info logs under an "error" level: none sent


def test_an_invalid_log_level_is_invalid_params(mcp_server):
    reply = ModernClient(mcp_server.url, log_level="loud").post("tools/list", request_id=3)
    error_of(reply, 400, -32602, 3)


@pytest.mark.parametrize("tool", ["echo", "slow_job"])
@pytest.mark.parametrize("token", [1.5, True, {}, 2**64], ids=["float", "bool", "object", "beyond-64-bit"])
def test_a_bad_progress_token_is_400_invalid_params_with_the_request_id(modern, tool, token):
    """The legacy era's rule for progress tokens ("MUST be a string or integer value"), answered as
    a malformed _meta is in this era: before the tool (or its job) starts, with the request's id."""
    params = {"name": tool, "arguments": {"text": "x", "steps": 1, "interval_ms": 1},
              "_meta": {"progressToken": token}}
    error = error_of(modern.post("tools/call", params, request_id=41), 400, -32602, 41)
    assert "progressToken" in error["message"]


def test_a_background_tool_runs_in_a_worker_with_progress(modern, celery_worker):
    stream = modern.open("tools/call", {"name": "slow_job", "arguments": {"steps": 3, "interval_ms": 1},
                                        "_meta": {"progressToken": 5}}, timeout=60)
    messages = stream_messages(stream)
    progress = [m["params"]["progress"] for m in messages if m.get("method") == "notifications/progress"]
    assert progress[:3] == [1, 2, 3]
    assert messages[-1]["result"]["content"][0]["text"] == "done 3"
    assert messages[-1]["result"]["resultType"] == "complete"


# --- subscriptions/listen ----------------------------------------------------------------------------------

def open_listen(client, notifications, request_id):
    stream = client.open("subscriptions/listen", {"notifications": notifications}, request_id=request_id)
    assert stream.status == 200 and stream.headers["content-type"].startswith(SSE)
    ack = json.loads(stream.next_event(TIMEOUT).data)
    assert ack["method"] == "notifications/subscriptions/acknowledged"  # "The first message MUST be"
    assert ack["params"]["_meta"][SUBSCRIPTION_ID] == request_id
    return stream, ack


def next_message(stream):
    while True:
        event = stream.next_event(TIMEOUT)
        assert event is not None, "the listen stream ended"
        if event.data:
            return json.loads(event.data)


def test_listen_relays_changes_made_on_another_process_with_the_subscription_id(mcp_server, second_server):
    tools, ack = open_listen(ModernClient(mcp_server.url), {"toolsListChanged": True, "promptsListChanged": False},
                             "sub-1")
    prompts, _ = open_listen(ModernClient(mcp_server.url), {"promptsListChanged": True}, 42)
    try:
        assert ack["params"]["notifications"] == {"toolsListChanged": True}
        trigger = ModernClient(second_server.url)
        result_of(trigger.post("tools/call", {"name": "test_trigger_tool_change"}))
        result_of(trigger.post("tools/call", {"name": "test_trigger_prompt_change"}))
        change = next_message(tools)
        assert change["method"] == "notifications/tools/list_changed"
        assert change["params"]["_meta"][SUBSCRIPTION_ID] == "sub-1"
        # The prompts-only stream got the prompt change first: the tool change was never sent to it.
        change = next_message(prompts)
        assert change["method"] == "notifications/prompts/list_changed"
        assert change["params"]["_meta"][SUBSCRIPTION_ID] == 42
    finally:
        tools.close()
        prompts.close()


def test_listen_relays_resource_updates_only_for_the_uris_asked_for(mcp_server, server_env):
    stream, ack = open_listen(ModernClient(mcp_server.url), {"resourceSubscriptions": ["test://watched-resource"]}, 7)
    try:
        assert ack["params"]["notifications"] == {"resourceSubscriptions": ["test://watched-resource"]}
        # From a process that is not a web server at all (a management shell, as a cron job would).
        subprocess.run([sys.executable, "manage.py", "shell", "-c",
                        "from mcp_transport.methods.notify import resource_updated_sync as f\n"
                        "f('test://static-text'); f('test://watched-resource')"],
                       check=True, env={**os.environ, **server_env}, cwd=server_env["PYTHONPATH"])
        update = next_message(stream)
        assert update == {"jsonrpc": "2.0", "method": "notifications/resources/updated",
                          "params": {"uri": "test://watched-resource", "_meta": {SUBSCRIPTION_ID: 7}}}
    finally:
        stream.close()


@pytest.fixture(scope="module")
def quick_keepalive_server(start_server):
    return start_server(MCP_TRANSPORT_JSON=json.dumps({"KEEPALIVE_SECONDS": 0.2}))


def test_a_silent_long_call_turns_into_sse_with_keepalives(quick_keepalive_server):
    # No progressToken: slow_progress sends nothing for ~1 s, longer than KEEPALIVE_SECONDS.
    stream = ModernClient(quick_keepalive_server.url).open(
        "tools/call", {"name": "slow_progress", "arguments": {"steps": 5, "interval_ms": 200}})
    messages = stream_messages(stream)
    assert b": ping" in stream.raw
    assert [m["result"]["content"][0]["text"] for m in messages] == ["done 5"]


def test_a_quiet_listen_stream_gets_keepalives(quick_keepalive_server):
    stream, _ = open_listen(ModernClient(quick_keepalive_server.url), {"toolsListChanged": True}, 1)
    try:
        stream.connection.sock.settimeout(TIMEOUT)
        while b": ping" not in stream.raw:  # comments are no events: read the raw bytes
            chunk = stream.response.read1(65536)
            assert chunk, "the listen stream ended"
            stream.raw += chunk
    finally:
        stream.close()


def test_listen_ends_gracefully_with_its_final_result(start_server):
    server = start_server(MCP_TRANSPORT_JSON=json.dumps({"LISTEN_MAX_SECONDS": 0.5}))
    stream, _ = open_listen(ModernClient(server.url), {"toolsListChanged": True}, "s")
    messages = stream.messages(timeout=TIMEOUT)
    # Its result is stamped as every result is ("servers SHOULD put serverInfo in its _meta").
    assert messages == [{"jsonrpc": "2.0", "id": "s",
                         "result": {"resultType": "complete",
                                    "_meta": {SUBSCRIPTION_ID: "s", "io.modelcontextprotocol/serverInfo": ANY}}}]
    assert stream.closed_by_server


def test_concurrent_listeners_do_not_slow_a_plain_request(mcp_server):
    streams = [open_listen(ModernClient(mcp_server.url), {"toolsListChanged": True}, i)[0] for i in range(20)]
    try:
        result_of(ModernClient(mcp_server.url).post("tools/call", {"name": "echo", "arguments": {"text": "x"}},
                                                    timeout=5))
    finally:
        for stream in streams:
            stream.close()


# --- the legacy era on the same endpoint -------------------------------------------------------------------

def test_a_legacy_session_and_a_modern_request_side_by_side(mcp_server):
    legacy = HttpClient(mcp_server.url)
    legacy.initialize()
    done = []

    def modern_calls():
        client = ModernClient(mcp_server.url)
        done.extend(result_of(client.post("tools/call", {"name": "echo", "arguments": {"text": str(i)}}))
                    ["content"][0]["text"] for i in range(5))

    thread = threading.Thread(target=modern_calls)
    thread.start()
    assert "protocolVersion" not in legacy.call("tools/list")["result"]
    thread.join(TIMEOUT)
    assert done == ["0", "1", "2", "3", "4"]
    assert "resultType" not in legacy.call("tools/call", {"name": "echo", "arguments": {"text": "x"}})["result"]


# --- what a listen may hold (issue 20 #3) --------------------------------------------------------------
# A listen whose resourceSubscriptions held ~300,000 short URIs (under the body limit) was held
# in memory for up to an hour: about 25 MiB per open stream, and nothing capped how many one
# caller opened (30 of them took daphne from 216 to 922 MiB).

def refused_listen(client, notifications, request_id="too-much"):
    """(status, JSON body) of a listen the server refuses; (200, None) for one it accepts (closed)."""
    stream = client.open("subscriptions/listen", {"notifications": notifications}, request_id=request_id)
    try:
        return stream.status, (None if stream.status == 200 else json.loads(stream.response.read()))
    finally:
        stream.close()


def test_a_listen_obeys_the_subscription_caps_of_resources_subscribe(mcp_server):
    client = ModernClient(mcp_server.url)
    # Readable URIs (a listen may name only resources its caller may read); MAX_SUBSCRIPTIONS_PER_SESSION is 100.
    many = [f"test://template/{i}/data" for i in range(101)]
    status, body = refused_listen(client, {"resourceSubscriptions": many})
    assert status == 400 and body["error"]["code"] == -32602, body
    assert "100 at most" in body["error"]["message"]

    status, body = refused_listen(client, {"resourceSubscriptions": ["test://long/" + "x" * 2048]})
    assert status == 400 and body["error"]["code"] == -32602 and "2048 bytes" in body["error"]["message"], body

    stream, ack = open_listen(client, {"resourceSubscriptions": many[:100]}, "just-enough")
    stream.close()
    assert len(ack["params"]["notifications"]["resourceSubscriptions"]) == 100


def test_open_listens_count_against_a_per_caller_cap(start_server):
    server = start_server(MCP_TRANSPORT_JSON=json.dumps({"MAX_LISTENS_PER_CALLER": 2}))
    held = [open_listen(ModernClient(server.url), {"toolsListChanged": True}, i)[0] for i in range(2)]
    status, body = refused_listen(ModernClient(server.url), {"toolsListChanged": True})
    assert status == 429 and "2 open listens" in body["error"]["message"], body

    held.pop().close()  # the server notices the client left, and the place is free again
    deadline = time.monotonic() + 30
    while (status := refused_listen(ModernClient(server.url), {"toolsListChanged": True}, "again")[0]) == 429:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert status == 200
    for stream in held:
        stream.close()
