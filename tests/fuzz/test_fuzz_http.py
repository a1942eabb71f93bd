"""Property-based fuzz of the MCP endpoint, live (issue 10): a real daphne, a real Celery worker,
Redis and the database, over TCP.

What is fuzzed: POST bodies (bytes, JSON values, messages with one part broken), headers
(Content-Type, Accept, MCP-Protocol-Version, Mcp-Session-Id, Origin) and HTTP methods, every
method's params (with ids, ``_meta`` and progress tokens of every kind, NUL and lone surrogates,
numbers beyond 64 bits and beyond doubles), client responses and notifications, initialize
params, answers to questions never asked, ``Last-Event-ID`` resume ids (made up, and real ones bent), and 2026-07-28 requests
(every method's params under a valid envelope with any progress token, log level and client
info; a bad progress token alone must get 400, -32602, with the request's id).

What must hold for every case: no HTTP status >= 500; no in-band -32603 (the one the spec asks
for, tasks/result of a cancelled task, aside); every request answered: a request with a valid id
gets exactly one response carrying that id, on JSON or on its SSE stream (resumed as a client
would when the server closes a stream early), and every GET stream sends its first chunk at
once. After all of it the server is healthy: it answers new sessions, inline and background
tools and resumes, and its log holds no traceback.
"""
import base64
import http.client
import json
import os
from collections import Counter

import pytest
from hypothesis import given, settings, strategies as st

from mcp_transport.protocol.sse import SseDecoder
from mcp_transport.testing import HttpClient

from .conftest import PROFILE, examples

pytestmark = pytest.mark.usefixtures("celery_worker")

STATS = Counter()
#: The one -32603 the spec asks for: tasks/result of a task that was cancelled.
ALLOWED_INTERNAL = ("The task was cancelled before it finished.",)
READ_TIMEOUT = 60.0
#: Event ids the server gave out (resumes bend them), and task ids (tasks/* use them).
SEEN_EVENT_IDS, SEEN_TASK_IDS = [], []

# -- values ------------------------------------------------------------------------------------

NASTY_TEXT = st.sampled_from(["", "\x00", "a\x00b", "\ud800", "\udfff", "x\udbff", "\U0001F600", "é",
                              "\\u0000", "../..", "%00", "\r\n", "   ", "null", "mcp_transport.json",
                              "test://static-text", "g.0-0", "\u2028", "\ufeff", "a" * 300])
TEXT = st.text(max_size=16) | NASTY_TEXT
BIG_INTS = st.sampled_from([0, -1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -2**63, -2**63 - 1, 10**30])
INTS = st.integers(min_value=-1000, max_value=1000) | BIG_INTS | st.integers()
FLOATS = st.floats(allow_nan=True, allow_infinity=True)
#: Number tokens Python would never write: beyond doubles (1e999) and very long.
RAW_NUMBERS = ["1e999", "-1e999", "1E400", "1e-400", "-0", "0.0e0", "123456789012345678901234567890123456789"]
RAW = st.sampled_from(RAW_NUMBERS).map(lambda token: f"\ue000{token}\ue001")
SCALARS = st.none() | st.booleans() | INTS | FLOATS | TEXT | RAW
JSON = st.recursive(SCALARS, lambda children: st.lists(children, max_size=4)
                    | st.dictionaries(TEXT, children, max_size=4), max_leaves=10)
IDS = INTS | TEXT | st.sampled_from([None, True, 1.5, [], {}, "1"])
META = st.none() | JSON | st.fixed_dictionaries({}, optional={"progressToken": IDS, "other": JSON})


def encode(value) -> bytes:
    """JSON text as a client could send it: NaN and Infinity tokens, lone-surrogate escapes,
    and the raw number tokens of RAW."""
    text = json.dumps(value)
    for token in RAW_NUMBERS:
        text = text.replace(f'"\\ue000{token}\\ue001"', token)
    return text.encode()


# -- the methods and their params -----------------------------------------------------------------

SLOW = {"slow_progress", "slow_job", "stamp_job", "stamp_inline", "tick_job", "tick_job_idempotent"}
TOOLS = sorted(SLOW | {"echo", "test_simple_text", "test_image_content", "test_audio_content",
                       "test_embedded_resource", "test_multiple_content_types", "test_error_handling",
                       "test_tool_with_logging", "test_tool_with_progress", "test_reconnection", "test_sampling",
                       "test_elicitation", "test_elicitation_sep1034_defaults", "test_elicitation_sep1330_enums",
                       "json_schema_2020_12_tool", "whoami", "sales_report", "count_users", "client_roots",
                       "server_log", "test_missing_capability", "test_logging_tool", "test_streaming_elicitation",
                       "whoami_job", "confirm_job", "soft_limited_job", "hard_limited_job", "report_job",
                       "word_count", "test_trigger_tool_change", "test_trigger_prompt_change", "no_such_tool"})


def _small(strategy):
    return st.integers(min_value=-2, max_value=3) | strategy.filter(lambda v: not isinstance(v, int) or v < 4)


def arguments_for(name):
    """Anything for most tools; for tools that sleep or loop, numbers that end quickly (the run
    time of a call is another limit's business: TOOL_MAX_SECONDS)."""
    anything = st.dictionaries(TEXT, JSON, max_size=3)
    if name in SLOW:
        bounded = st.fixed_dictionaries({"steps": _small(SCALARS), "interval_ms": _small(SCALARS)},
                                        optional={"key": TEXT})
        return bounded | anything.map(lambda a: {**a, "steps": 1, "interval_ms": 1})
    if name in ("soft_limited_job", "hard_limited_job"):
        return st.fixed_dictionaries({"seconds": st.sampled_from([0, 0.01, -1, "x", None])})
    if name == "report_job":
        return st.fixed_dictionaries({"rows": _small(SCALARS)})
    if name == "word_count":
        return st.fixed_dictionaries({"text": TEXT}, optional={"every": _small(SCALARS)})
    if name == "echo":
        return st.fixed_dictionaries({"text": TEXT | JSON}) | anything
    return anything | st.none() | JSON


TOOL_CALL = st.sampled_from(TOOLS).flatmap(lambda name: st.fixed_dictionaries(
    {"name": st.just(name)},
    optional={"arguments": arguments_for(name), "_meta": META,
              "task": st.none() | JSON | st.fixed_dictionaries({"ttl": INTS | JSON})}))
URIS = st.sampled_from(["test://static-text", "test://static-binary", "test://template/1/data",
                        "test://watched-resource", "test://template/\x00/data", "skill://library-catalog/SKILL.md",
                        "skill://library-catalog/references/TOOLS.md", "skill://library-catalog",
                        "skill://library-catalog/references", "skill://library-curation/SKILL.md"]) | TEXT
PROMPTS = st.sampled_from(["test_simple_prompt", "test_prompt_with_arguments", "test_prompt_with_embedded_resource",
                           "test_prompt_with_image"]) | TEXT
LEVELS = st.sampled_from(["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]) | JSON
def _seen(found, default):
    """One of the ids the server gave out so far (a strategy cannot sample a list that grows)."""
    return st.integers(0, 10**6).map(lambda i: found[-1 - i % len(found)] if found else default)


TASK_IDS = _seen(SEEN_TASK_IDS, "none") | IDS | st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_\x00", min_size=32,
                    max_size=32)


def _with(fields, **optional):
    return st.fixed_dictionaries(fields, optional={"_meta": META, **optional})


PARAMS = {
    "ping": _with({}),
    "tools/list": _with({}, cursor=JSON),
    "tools/call": TOOL_CALL,
    "resources/list": _with({}, cursor=JSON),
    "resources/templates/list": _with({}, cursor=JSON),
    "resources/read": _with({"uri": URIS}),
    "resources/subscribe": _with({"uri": URIS}),
    "resources/unsubscribe": _with({"uri": URIS}),
    "prompts/list": _with({}, cursor=JSON),
    "prompts/get": _with({"name": PROMPTS}, arguments=st.dictionaries(TEXT, JSON, max_size=3) | JSON),
    "completion/complete": _with({"ref": st.fixed_dictionaries({"type": st.sampled_from(["ref/prompt", "ref/resource"])
                                                                       | JSON},
                                                               optional={"name": PROMPTS, "uri": URIS}) | JSON,
                                  "argument": st.fixed_dictionaries({"name": TEXT | JSON},
                                                                    optional={"value": JSON}) | JSON},
                                 context=JSON),
    "logging/setLevel": _with({"level": LEVELS}),
    "skills/list": _with({}, cursor=JSON),
    "skills/get": _with({"uri": URIS}),
    "resources/directory/read": _with({"uri": URIS}, cursor=JSON),
    "tasks/get": _with({"taskId": TASK_IDS}),
    "tasks/list": _with({}, cursor=JSON),
    "tasks/cancel": _with({"taskId": TASK_IDS}),
    "tasks/result": _with({"taskId": TASK_IDS}),
    "initialize": _with({"protocolVersion": TEXT}, capabilities=JSON, clientInfo=JSON),
}
METHODS = st.sampled_from(sorted(PARAMS)) | TEXT | st.sampled_from(["notifications/initialized", "sampling/createMessage"])


@st.composite
def requests(draw):
    """A request: mostly well formed, each with a chance of params that are not an object."""
    method = draw(METHODS)
    params = draw(PARAMS[method]) if method in PARAMS else draw(st.dictionaries(TEXT, JSON, max_size=3))
    message = {"jsonrpc": "2.0", "id": draw(IDS), "method": method}
    if draw(st.integers(0, 19)) == 0:
        params = draw(JSON)
    if draw(st.integers(0, 9)):
        message["params"] = params
    return message


# -- one exchange, and what must hold for it --------------------------------------------------------

class Session:
    """The fuzz's own session (renewed if it ever ends)."""

    def __init__(self, url):
        self.url = url
        self.client = HttpClient(url)
        self.client.initialize()

    def headers(self, extra=None):
        return self.client.headers(extra)


def valid_request_id(message) -> bool:
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return False
    request_id = message["id"]
    return isinstance(request_id, str) or (isinstance(request_id, int) and not isinstance(request_id, bool)
                                           and -2**63 <= request_id <= 2**64 - 1)


def _connection(client, timeout=READ_TIMEOUT):
    return http.client.HTTPConnection(client.host, client.port, timeout=timeout)


def exchange(client, method, body=b"", headers=None, expect_id=None, resume=True):
    """Send one request; check the invariants on whatever comes back. Returns (status, messages,
    the response's headers)."""
    STATS["cases"] += 1
    connection = _connection(client)
    try:
        connection.request(method, client.path, body=body, headers=headers or {})
        response = connection.getresponse()
        status, response_headers = response.status, {k.lower(): v for k, v in response.getheaders()}
        STATS[f"status:{status}"] += 1
        assert status < 500, (status, method, body[:300], response.read()[:300])
        if response.getheader("content-type", "").startswith("text/event-stream"):
            if method == "GET":
                first = response.read1(65536)  # a GET stream may stay open: its first chunk comes at once
                assert first, "a GET stream ended before its first chunk"
                return status, [], response_headers
            messages, last_id = read_stream(response)
        else:
            raw = response.read()
            # Not JSON when daphne refused the request before the app saw it (an invalid header).
            is_json = response_headers.get("content-type", "").startswith("application/json")
            messages, last_id = ([json.loads(raw)] if raw and is_json else []), None
    finally:
        connection.close()
    for message in messages:
        check_message(message, body)
    if expect_id is not None and status == 200:
        answers = answers_to(messages, expect_id)
        if not answers and last_id and resume:
            answers = resume_until_answered(client, headers, last_id, expect_id)
        assert len(answers) == 1, ("unanswered or answered twice", expect_id, body[:300], messages[-3:])
        STATS["answered"] += 1
    return status, messages, response_headers


def read_stream(response):
    decoder, messages = SseDecoder(), []
    while True:
        chunk = response.read1(65536)
        if not chunk:
            break
        for event in decoder.feed(chunk):
            if event.id:
                SEEN_EVENT_IDS.append(event.id)
                del SEEN_EVENT_IDS[:-200]
            if event.data:
                messages.append(json.loads(event.data))
    return messages, decoder.last_event_id


def answers_to(messages, request_id):
    return [m for m in messages if isinstance(m, dict) and "method" not in m and m.get("id") == request_id
            and ("result" in m or "error" in m)]


def resume_until_answered(client, headers, last_id, request_id):
    """What a client does when the server closed the stream before the response (SEP-1699)."""
    for _ in range(10):
        STATS["resumes"] += 1
        connection = _connection(client)
        try:
            resume_headers = {k: v for k, v in (headers or {}).items() if k.lower() in ("mcp-session-id",
                                                                                      "mcp-protocol-version")}
            connection.request("GET", client.path, headers={**resume_headers, "Accept": "text/event-stream",
                                                            "Last-Event-ID": last_id})
            response = connection.getresponse()
            assert response.status < 500, response.status
            if response.status != 200:
                return []
            messages, last_id = read_stream(response)
        finally:
            connection.close()
        for message in messages:
            check_message(message, b"resume")
        answers = answers_to(messages, request_id)
        if answers:
            return answers
    return []


def check_message(message, body):
    if not isinstance(message, dict):
        return
    if isinstance(message.get("result"), dict) and isinstance(message["result"].get("task"), dict):
        task_id = message["result"]["task"].get("taskId")
        if isinstance(task_id, str):
            SEEN_TASK_IDS.append(task_id)
            del SEEN_TASK_IDS[:-50]
    error = message.get("error")
    if isinstance(error, dict) and error.get("code") == -32603:
        assert error.get("message") in ALLOWED_INTERNAL, ("in-band -32603 for client input", message, body[:300])
        STATS["internal_allowed"] += 1


# -- the properties --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fuzz_session(fuzz_server):
    return Session(fuzz_server.url)


@settings(settings.get_profile("mcp-fuzz"), max_examples=examples(240, 40_000))
@given(message=requests())
def test_every_method_with_any_params(fuzz_session, message):
    body = encode(message)
    expect = message["id"] if valid_request_id(message) and not _breaks_parse(body) else None
    exchange(fuzz_session.client, "POST", body, fuzz_session.headers(), expect_id=expect)


def _breaks_parse(body: bytes) -> bool:
    """Bodies the server must refuse as a whole (400), answered without the request's id."""
    from mcp_transport.protocol import jsonrpc
    from mcp_transport.protocol.errors import RemoteProtocolError

    try:
        jsonrpc.parse(body)
    except RemoteProtocolError:
        return True
    return False


CLIENT_MESSAGES = st.one_of(
    st.fixed_dictionaries({"jsonrpc": st.just("2.0"), "id": IDS},
                          optional={"result": JSON, "error": JSON | st.fixed_dictionaries({"code": INTS},
                                                                                       optional={"message": JSON})}),
    st.fixed_dictionaries({"jsonrpc": st.just("2.0"),
                           "method": st.sampled_from(["notifications/cancelled", "notifications/initialized",
                                                      "notifications/progress", "notifications/roots/list_changed",
                                                      "notifications/message"]) | TEXT},
                          optional={"params": st.fixed_dictionaries({}, optional={"requestId": IDS, "reason": JSON,
                                                                                  "progressToken": IDS,
                                                                                  "progress": SCALARS})
                                    | JSON}),
)


@settings(settings.get_profile("mcp-fuzz"), max_examples=examples(150, 15_000))
@given(message=CLIENT_MESSAGES)
def test_client_responses_and_notifications(fuzz_session, message):
    status, messages, _ = exchange(fuzz_session.client, "POST", encode(message), fuzz_session.headers())
    assert status in (202, 400), (status, messages)


class AskedSession(Session):
    """A session that accepts elicitation, and how many questions the server has asked it."""

    def __init__(self, url):
        self.url, self.asked = url, 0
        self.client = HttpClient(url)
        self.client.initialize(capabilities={"elicitation": {}})


@pytest.fixture(scope="module")
def asked_session(fuzz_server):
    return AskedSession(fuzz_server.url)


ANSWERS = st.fixed_dictionaries({"jsonrpc": st.just("2.0")},
                                optional={"result": JSON | st.just({"action": "accept", "content": {
                                    "username": "x", "email": "x@example.com"}}), "error": JSON})


@settings(settings.get_profile("mcp-fuzz"), max_examples=examples(20, 1_000))
@given(answers=st.lists(st.tuples(st.integers(0, 3), ANSWERS), max_size=4))
def test_no_answer_counts_before_its_question(asked_session, answers):
    """Issue 30 (own attacker pass): answers POSTed ahead of the server's next questions (their
    ids are sequential) are accepted or refused, and never taken: the tool's question is still
    sent, and the answer given after it is the one the tool gets."""
    client = asked_session.client
    for ahead, answer in answers:
        status, messages, _ = exchange(client, "POST", encode({**answer, "id": asked_session.asked + 1 + ahead}),
                                       asked_session.headers())
        assert status in (202, 400), (status, messages)
    stream = client.call_tool_stream("test_elicitation", {"message": "fuzz"})
    try:
        question = stream.next_message(timeout=READ_TIMEOUT)
        asked_session.asked += 1
        assert (question.get("method"), question.get("id")) == ("elicitation/create", asked_session.asked), question
        taken = client.request("POST", {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "decline"}})
        assert taken.status == 202, (taken.status, taken.body)
        final = stream.next_message(timeout=READ_TIMEOUT)
        assert "action=decline" in final["result"]["content"][0]["text"], final
    finally:
        stream.close()


BODIES = st.one_of(
    st.binary(max_size=300),
    JSON.map(encode),
    st.tuples(requests(), st.integers(1, 400)).map(lambda cut: encode(cut[0])[:cut[1]]),  # cut anywhere
    requests().map(lambda m: encode([m])),  # a batch
    st.sampled_from([b"", b"{}", b"[]", b"null", b'{"jsonrpc":"2.0"}', b"\xff\xfe", b'{"jsonrpc":"2.0","id":1,'
                     b'"method":"ping"}\x00', "\ufeff{}".encode(), b'{"a":' * 5000]),
)


@settings(settings.get_profile("mcp-fuzz"), max_examples=examples(150, 15_000))
@given(body=BODIES)
def test_any_body(fuzz_session, body):
    exchange(fuzz_session.client, "POST", body, fuzz_session.headers())


HEADER_VALUE = st.one_of(st.none(), st.sampled_from(["", "*/*", "application/json", "text/event-stream",
                                                     "application/json, text/event-stream",
                                                     "text/event-stream;q=0.1, application/json;q=0.9",
                                                     "application/json; charset=utf-8", "text/plain",
                                                     "2025-11-25", "2025-06-18", "2026-07-28", "1999-01-01",
                                                     "http://localhost", "http://evil.example", "null"]),
                         st.binary(max_size=40).filter(lambda b: b"\r" not in b and b"\n" not in b
                                                       and b"\x00" not in b).map(lambda b: b.strip(b" \t")))
def header_bytes(text: str) -> bytes:
    """A header value a client can send: no CR, LF or NUL (http.client refuses them)."""
    return text.encode("utf-8", "replace").translate(None, b"\r\n\x00").strip(b" \t")


SESSION_IDS = st.sampled_from(["real", "none", "short", "unknown"]) | TEXT.map(header_bytes)


@settings(settings.get_profile("mcp-fuzz"), max_examples=examples(150, 15_000))
@given(method=st.sampled_from(["POST", "POST", "GET", "DELETE", "PUT", "PATCH", "OPTIONS", "HEAD"]),
       content_type=HEADER_VALUE, accept=HEADER_VALUE, version=HEADER_VALUE, origin=HEADER_VALUE,
       session_id=SESSION_IDS, message=requests())
def test_headers_and_methods(fuzz_session, method, content_type, accept, version, origin, session_id, message):
    headers = {}
    for name, value in (("Content-Type", content_type), ("Accept", accept), ("MCP-Protocol-Version", version),
                        ("Origin", origin)):
        if value is not None:
            headers[name] = value
    real = fuzz_session.client.session_id
    session_value = {"real": real, "none": None, "short": "abc", "unknown": "x" * 32}.get(session_id, session_id)
    if method == "DELETE" and session_value == real:
        session_value = "y" * 32  # the fuzz's own session stays; DELETE is fuzzed with every other id
    if session_value is not None:
        headers["Mcp-Session-Id"] = session_value
    body = encode(message) if method == "POST" else b""
    exchange(fuzz_session.client, method, body, headers)


EVENT_IDS = st.one_of(
    st.builds(lambda stream, ms, seq: f"{stream}.{ms}-{seq}",
              st.sampled_from(["g", "0123456789abcdef"]) | st.text("0123456789abcdef", min_size=16, max_size=16) | TEXT,
              INTS, INTS),
    _seen(SEEN_EVENT_IDS, "g.0-0"),
    st.tuples(_seen(SEEN_EVENT_IDS, "g.0-0"), st.integers(-3, 3) | BIG_INTS).map(lambda bend: _bent(*bend)),
    TEXT,
)


def _bent(event_id, delta):
    stream, _, position = event_id.partition(".")
    ms, _, seq = position.partition("-")
    try:
        return f"{stream}.{ms}-{int(seq) + delta}"
    except ValueError:
        return event_id


@settings(settings.get_profile("mcp-fuzz"), max_examples=examples(150, 15_000))
@given(event_id=EVENT_IDS, accept=st.sampled_from(["text/event-stream", "*/*", "application/json", None]))
def test_resume_ids(fuzz_session, event_id, accept):
    headers = fuzz_session.headers({"Last-Event-ID": header_bytes(event_id), "Accept": accept,
                                    "Content-Type": None})
    exchange(fuzz_session.client, "GET", b"", headers)


@settings(settings.get_profile("mcp-fuzz"), max_examples=examples(80, 2_000))
@given(params=PARAMS["initialize"] | JSON, request_id=IDS)
def test_initialize_params(fuzz_server, params, request_id):
    client = HttpClient(fuzz_server.url)
    message = {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}
    body = encode(message)
    expect = request_id if valid_request_id(message) and not _breaks_parse(body) else None
    _, _, headers = exchange(client, "POST", body, client.headers(session=False), expect_id=expect)
    if headers.get("mcp-session-id"):  # leave no session behind (MAX_SESSIONS_PER_ADDRESS)
        client.session_id = headers["mcp-session-id"]
        status, _, _ = exchange(client, "DELETE", b"", client.headers())
        assert status == 200


# -- the 2026-07-28 era: stateless requests, every method's params with a valid envelope ------------

MODERN = "2026-07-28"
#: Where a method's Mcp-Name header comes from (protocol/modern.py's NAME_BEARING).
NAME_BEARING = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
                "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId", "tasks/stream": "taskId"}
MODERN_CAPABILITIES = st.sampled_from([{}, {"extensions": {"io.modelcontextprotocol/tasks": {}}},
                                       {"sampling": {}, "elicitation": {}, "roots": {}}])
#: Progress tokens, the ones the shared rule refuses often among them.
PROGRESS_TOKENS = IDS | st.sampled_from([1.5, 1.0, True, {}, [1], 2**64, -2**63 - 1, "p", 7, "\x00"])
MODERN_EXTRA_META = st.fixed_dictionaries({}, optional={"progressToken": PROGRESS_TOKENS,
                                                        "io.modelcontextprotocol/logLevel": LEVELS,
                                                        "io.modelcontextprotocol/clientInfo": JSON, "other": JSON})
MODERN_PARAMS = {**PARAMS, "server/discover": _with({}),
                 "tasks/update": _with({"taskId": TASK_IDS}, inputResponses=JSON),
                 # Not the tasks seen: a stream of one lasts until the task ends.
                 "tasks/stream": _with({"taskId": IDS | st.text(min_size=32, max_size=32)}, after=JSON)}
#: subscriptions/listen streams until LISTEN_MAX_SECONDS: not a case for a fuzz that reads to the end.
MODERN_METHODS = (st.sampled_from(sorted(MODERN_PARAMS)) | TEXT).filter(lambda m: m != "subscriptions/listen")


@st.composite
def modern_requests(draw):
    """A request of the 2026-07-28 era: its params as in the legacy fuzz, with a ``_meta`` whose
    envelope (version, client capabilities) is valid nine times in ten, plus any progress token,
    log level and client info."""
    method = draw(MODERN_METHODS)
    params = draw(MODERN_PARAMS[method]) if method in MODERN_PARAMS else draw(st.dictionaries(TEXT, JSON, max_size=3))
    if draw(st.integers(0, 9)):
        params = {**params, "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                                      "io.modelcontextprotocol/clientCapabilities": draw(MODERN_CAPABILITIES),
                                      **draw(MODERN_EXTRA_META)}}
    return {"jsonrpc": "2.0", "id": draw(IDS), "method": method, "params": params}


def modern_headers(message):
    """The headers a modern client sends: a text value goes base64-encoded (=?base64?...?=)."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": MODERN}
    method = message["method"]
    headers["Mcp-Method"] = header_bytes(method)
    value = message["params"].get(NAME_BEARING.get(method, ""))
    if value is not None:
        text = value if isinstance(value, str) else json.dumps(value)
        encoded = base64.b64encode(text.encode("utf-8", "surrogatepass")).decode()
        headers["Mcp-Name"] = f"=?base64?{encoded}?="
    return headers


def _only_the_progress_token_is_bad(body: bytes, headers) -> bool:
    """The request passes every check of the modern envelope (protocol/modern.py) but the
    progress token's: then the token must be what the server refuses."""
    from mcp_transport.protocol import jsonrpc, modern
    from mcp_transport.protocol.errors import ProtocolError

    try:
        request = jsonrpc.parse(body)
    except ProtocolError:
        return False
    meta = getattr(request, "params", {}).get("_meta")
    if not hasattr(request, "id") or not isinstance(meta, dict) or "progressToken" not in meta:
        return False
    try:
        jsonrpc.progress_token(request.params)
        return False
    except ProtocolError:
        pass
    lowered = {name.lower(): value.decode("latin-1") if isinstance(value, bytes) else value
               for name, value in headers.items()}
    without = jsonrpc.Request(id=request.id, method=request.method,
                              params={**request.params, "_meta": {k: v for k, v in meta.items() if k != "progressToken"}})
    try:
        return modern.is_modern(without, lowered) and modern.check_envelope(without, lowered) is not None
    except ProtocolError:
        return False


@settings(settings.get_profile("mcp-fuzz"), max_examples=examples(170, 20_000))
@given(message=modern_requests())
def test_modern_requests_with_any_params(fuzz_server, message):
    """The invariants of every request, and the legacy era's progress-token rule answered as this
    era answers a malformed ``_meta``: 400, -32602, with the request's id."""
    client = HttpClient(fuzz_server.url)
    body, headers = encode(message), modern_headers(message)
    expect = message["id"] if valid_request_id(message) and not _breaks_parse(body) else None
    status, messages, _ = exchange(client, "POST", body, headers, expect_id=expect, resume=False)
    if _only_the_progress_token_is_bad(body, headers):
        assert status == 400 and len(messages) == 1, (status, messages)
        error = messages[0]["error"]
        assert error["code"] == -32602 and "progressToken" in error["message"], messages
        assert messages[0]["id"] == message["id"]
        STATS["modern_bad_progress_token"] += 1


def test_the_server_is_healthy_afterwards(fuzz_server, fuzz_session):
    """New sessions work, inline and background tools answer, resumes replay; the process is up
    and its log holds no traceback."""
    assert fuzz_server.process.poll() is None
    client = HttpClient(fuzz_server.url)
    client.initialize()
    assert client.call("tools/call", {"name": "echo", "arguments": {"text": "still here"}})["result"][
        "structuredContent"] == {"result": "still here"}
    call = client.message("tools/call", {"name": "slow_job", "arguments": {"steps": 2, "interval_ms": 1}})
    stream = client.stream("POST", call)
    priming = stream.next_event(timeout=60)
    stream.close()
    resumed = client.stream("GET", headers={"Accept": "text/event-stream", "Last-Event-ID": priming.id})
    results = [m for m in resumed.messages(timeout=60) if m.get("id") == call["id"]]
    assert len(results) == 1 and results[0]["result"]["structuredContent"] == {"result": "done 2"}
    log = fuzz_server.log()
    assert "Traceback" not in log, log[log.index("Traceback") - 2000:][:6000]
    report()


def report():
    figures = {"profile": PROFILE, **dict(sorted(STATS.items()))}
    print("\nfuzz figures:", json.dumps(figures))
    if os.environ.get("MCP_FUZZ_REPORT"):
        with open(os.environ["MCP_FUZZ_REPORT"], "w") as out:
            json.dump(figures, out, indent=1)
