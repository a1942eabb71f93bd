"""Property-based fuzz of what a client's messages are shaped like (issue 20), live: a real daphne,
Celery worker, Redis and database.

- Nesting depth of every object the server keeps (initialize's clientInfo and capabilities,
  ``_meta``, tool arguments, a background job's arguments, a client's answers, a 2026-07-28
  request's clientInfo and inputResponses): up to MAX_JSON_DEPTH it is served as any request,
  past it the answer is 400, -32602 and nothing is kept.
- CR, LF and the other control characters in every string the server logs (clientInfo's name and
  version, request ids, method and tool names, what a tool logs, a 2026-07-28 request's
  clientInfo): no client text ever starts a line of the server's log.
- Oversized arrays in every list parameter of both eras (tool and prompt arguments, capabilities,
  ``_meta``, a client's answers, inputResponses, completion context), under the body limit:
  answered, never 5xx or -32603.

Every case also keeps the invariants of tests/fuzz/test_fuzz_http.py's ``exchange``.
"""
import json

import pytest
from hypothesis import given, settings, strategies as st

from mcp_transport.testing import HttpClient

from .conftest import examples
from .test_fuzz_http import MODERN, STATS, exchange, modern_headers, report

pytestmark = pytest.mark.usefixtures("celery_worker")

MAX_DEPTH = 64  # MAX_JSON_DEPTH's default
#: Marks a line a forged record would start with; the log must never have a line starting so.
FORGED = "FORGED-LINE"
CONTROLS = st.sampled_from(["\r\n", "\n", "\r", "\x1b[2J", "\x00", "\x0b", "\x0c", "\x1c", "\x85", "\u2028",
                            "\u2029", "\t", "\x7f", "\x9b"])


def nested(depth: int, kind: str):
    """``depth`` arrays or objects inside one another (0: a plain string)."""
    value = "leaf"
    for n in range(depth):
        value = {"k": value} if kind == "object" or (kind == "mixed" and n % 2) else [value]
    return value


def depth_of(value) -> int:
    if isinstance(value, dict):
        return 1 + max(map(depth_of, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth_of, value), default=0)
    return 0


def legacy(method, params, request_id=1):
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def modern(method, params, meta=None, request_id=1):
    envelope = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities":
                {"elicitation": {}, "sampling": {}, "roots": {}}, **(meta or {})}
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**params, "_meta": envelope}}


def _initialize(client_info=None, capabilities=None):
    return legacy("initialize", {"protocolVersion": "2025-11-25", "capabilities": capabilities or {},
                                 "clientInfo": client_info or {"name": "fuzz", "version": "1"}})


#: Where a client's structure is kept: (name, era, message with ``value`` in it).
KEPT = {
    "clientInfo": ("initialize", lambda v: _initialize({"name": "fuzz", "version": "1", "x": v})),
    "capabilities": ("initialize", lambda v: _initialize(capabilities={"experimental": {"x": v}})),
    "tool arguments": ("session", lambda v: legacy("tools/call", {"name": "echo", "arguments": {"text": "t", "x": v}})),
    "job arguments": ("session", lambda v: legacy("tools/call", {"name": "slow_job", "arguments":
                                                               {"steps": 1, "interval_ms": 1, "x": v}})),
    "_meta": ("session", lambda v: legacy("tools/call", {"name": "echo", "arguments": {"text": "t"},
                                                         "_meta": {"progressToken": "p", "x": v}})),
    "prompt arguments": ("session", lambda v: legacy("prompts/get", {"name": "test_simple_prompt",
                                                                     "arguments": {"x": v}})),
    "client answer": ("session", lambda v: {"jsonrpc": "2.0", "id": 99, "result": {"action": "accept", "content": v}}),
    "2026 clientInfo": ("modern", lambda v: modern("tools/call", {"name": "echo", "arguments": {"text": "t"}},
                                                   {"io.modelcontextprotocol/clientInfo": {"name": "f", "x": v}})),
    "2026 inputResponses": ("modern", lambda v: modern("tools/call", {
        "name": "test_input_required_result_multi_round", "arguments": {},
        "inputResponses": {"step1": {"action": "accept", "content": {"name": "n", "x": v}}}})),
}


@pytest.fixture(scope="module")
def fuzz_client(fuzz_server):
    client = HttpClient(fuzz_server.url)
    client.initialize()
    return client


def send(fuzz_server, fuzz_client, era, message, extra_headers=None):
    """POST ``message`` as its era sends it; (status, messages, headers), invariants checked."""
    body = json.dumps(message).encode()
    expect = message.get("id") if "method" in message else None
    if era == "modern":
        return exchange(HttpClient(fuzz_server.url), "POST", body, {**modern_headers(message), **(extra_headers or {})},
                        expect_id=expect, resume=False)
    client = fuzz_client if era == "session" else HttpClient(fuzz_server.url)
    headers = client.headers(extra_headers, session=era == "session")
    outcome = exchange(client, "POST", body, headers, expect_id=expect)
    session_id = outcome[2].get("mcp-session-id")
    if era == "initialize" and session_id:  # leave no session behind (MAX_SESSIONS_PER_ADDRESS)
        client.session_id = session_id
        assert exchange(client, "DELETE", b"", client.headers())[0] == 200
    return outcome


@settings(settings.get_profile("mcp-fuzz"), max_examples=examples(40, 5_000))
@given(place=st.sampled_from(sorted(KEPT)), depth=st.integers(0, 3 * MAX_DEPTH) | st.integers(MAX_DEPTH - 6, MAX_DEPTH + 2),
       kind=st.sampled_from(["object", "array", "mixed"]))
def test_nesting_depth_of_everything_kept(fuzz_server, fuzz_client, place, depth, kind):
    era, make = KEPT[place]
    message = make(nested(depth, kind))
    status, messages, headers = send(fuzz_server, fuzz_client, era, message)
    if depth_of(message) > MAX_DEPTH:
        assert status == 400 and messages[0]["error"]["code"] == -32602, (place, depth, status, messages)
        assert "mcp-session-id" not in headers
        STATS["shapes:too_deep"] += 1
    else:
        assert status != 400 or messages[0]["error"]["code"] != -32602 or "deep" not in messages[0]["error"]["message"]
        STATS["shapes:deep_kept"] += 1


def _forging(controls, n):
    return f"{controls}{FORGED} {n}"


#: Every string a client controls that the server logs: (era, message, extra headers) for a text.
LOGGED = {
    "clientInfo name": lambda t: ("initialize", _initialize({"name": t, "version": "1"}), None),
    "clientInfo version": lambda t: ("initialize", _initialize({"name": "fuzz", "version": t}), None),
    "request id": lambda t: ("session", legacy("tools/call", {"name": "server_log", "arguments": {"text": "x"}},
                                               request_id=t[:200]), None),
    "tool log text": lambda t: ("session", legacy("tools/call", {"name": "server_log", "arguments": {"text": t}}), None),
    "method name": lambda t: ("session", legacy(t, {}), None),
    "tool name": lambda t: ("session", legacy("tools/call", {"name": t, "arguments": {}}), None),
    "job tool text": lambda t: ("session", legacy("tools/call", {"name": "slow_job",
                                                                 "arguments": {"steps": t, "interval_ms": 1}}), None),
    "2026 request id": lambda t: ("modern", modern("tools/call", {"name": "server_log", "arguments": {"text": "x"}},
                                                   request_id=t[:200]), None),
    "2026 tool log text": lambda t: ("modern", modern("tools/call", {"name": "server_log", "arguments": {"text": t}}),
                                     None),
    "2026 clientInfo": lambda t: ("modern", modern("tools/call", {"name": "echo", "arguments": {"text": "t"}},
                                                   {"io.modelcontextprotocol/clientInfo": {"name": t, "version": t}}),
                                  None),
}


@settings(settings.get_profile("mcp-fuzz"), max_examples=examples(40, 5_000))
@given(place=st.sampled_from(sorted(LOGGED)), controls=st.lists(CONTROLS, min_size=1, max_size=3).map("".join),
       prefix=st.text(max_size=8))
def test_control_characters_in_every_logged_string(fuzz_server, fuzz_client, place, controls, prefix):
    STATS["shapes:forging"] += 1
    era, message, headers = LOGGED[place](prefix + _forging(controls, STATS["shapes:forging"]))
    send(fuzz_server, fuzz_client, era, message, headers)
    forged = [line for line in fuzz_server.log().splitlines() if line.startswith(FORGED)]
    assert forged == [], (place, repr(controls), forged[:3])


def _big_array(size, kind):
    item = {"text": "a"} if kind == "objects" else ("s" if kind == "strings" else 1)
    return [item] * size


#: Every list parameter of both eras: (era, message with the array in it).
LISTS = {
    "tool arguments": ("session", lambda a: legacy("tools/call", {"name": "echo", "arguments": {"text": a}})),
    "job arguments": ("session", lambda a: legacy("tools/call", {"name": "slow_job", "arguments":
                                                               {"steps": a, "interval_ms": 1}})),
    "prompt arguments": ("session", lambda a: legacy("prompts/get", {"name": "test_prompt_with_arguments",
                                                                     "arguments": {"arg1": a, "arg2": a}})),
    "completion context": ("session", lambda a: legacy("completion/complete", {
        "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"}, "argument": {"name": "arg1", "value": "x"},
        "context": {"arguments": {"x": a}}})),
    "capabilities": ("initialize", lambda a: _initialize(capabilities={"roots": {"x": a}, "experimental": {"y": a}})),
    "_meta": ("session", lambda a: legacy("ping", {"_meta": {"x": a}})),
    "sampling answer content": ("session", lambda a: {"jsonrpc": "2.0", "id": 98, "result": {
        "role": "assistant", "content": a, "model": "m"}}),
    "roots answer": ("session", lambda a: {"jsonrpc": "2.0", "id": 97, "result": {"roots": a}}),
    "2026 tool arguments": ("modern", lambda a: modern("tools/call", {"name": "echo", "arguments": {"text": a}})),
    "2026 inputResponses": ("modern", lambda a: modern("tools/call", {
        "name": "test_input_required_result_multi_round", "arguments": {},
        "inputResponses": {"step1": {"action": "accept", "content": {"name": a}}}})),
    "2026 capabilities": ("modern", lambda a: modern("tools/list", {}, {
        "io.modelcontextprotocol/clientCapabilities": {"roots": {"x": a}}})),
    "2026 tasks/update": ("modern", lambda a: modern("tasks/update", {"taskId": "x" * 32, "inputResponses": {"k": {
        "content": a}}})),
}


@settings(settings.get_profile("mcp-fuzz"), max_examples=examples(16, 2_000))
@given(place=st.sampled_from(sorted(LISTS)), size=st.sampled_from([10_000, 100_000, 400_000]),
       kind=st.sampled_from(["numbers", "strings", "objects"]))
def test_oversized_arrays_in_every_list_parameter(fuzz_server, fuzz_client, place, size, kind):
    era, make = LISTS[place]
    status, messages, _ = send(fuzz_server, fuzz_client, era, make(_big_array(size, kind)))
    STATS[f"shapes:big_array:{status}"] += 1


def test_the_server_is_healthy_afterwards(fuzz_server):
    """The process is up, a new session works, and the log holds no traceback."""
    assert fuzz_server.process.poll() is None
    client = HttpClient(fuzz_server.url)
    client.initialize()
    assert client.call("ping")["result"] == {}
    log = fuzz_server.log()
    assert "Traceback" not in log, log[log.index("Traceback") - 2000:][:6000]
    report()
