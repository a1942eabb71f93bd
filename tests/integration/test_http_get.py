"""The standalone GET stream and Last-Event-ID over raw HTTP (checklist C, E7, E8, G2, B1).

Every stream read has a timeout and every stream is closed in a ``finally``, so nothing hangs.
"""
import json
import time

import pytest

from mcp_transport.testing import HttpClient

JSON = "application/json"
SSE = "text/event-stream"
TIMEOUT = 10


def rejected(stream):
    """The Reply-like status and JSON body of a GET that did not open a stream."""
    try:
        body = stream.response.read()
    finally:
        stream.close()
    return stream.status, stream.headers.get("content-type", "").split(";")[0], json.loads(body)


def assert_rejected(stream, status, code=-32600):
    got_status, content_type, body = rejected(stream)
    assert got_status == status, (got_status, body)
    assert content_type == JSON
    assert "id" not in body and body["error"]["code"] == code, body


def open_get(client, headers=None):
    return client.stream("GET", None, headers, timeout=TIMEOUT)


def get_status(client, headers=None):
    stream = open_get(client, headers)
    try:
        return stream.status
    finally:
        stream.close()


# C2: a GET whose Accept does not allow text/event-stream -> 406.
@pytest.mark.parametrize("accept", ["application/json", "text/html", "text/event-stream;q=0", None])
def test_get_without_event_stream_accept_is_406(session, accept):
    assert_rejected(open_get(session, {"Accept": accept}), 406)


# C1 / B1 / B3: GET opens text/event-stream; its first event primes the client: a non-empty id,
# data == "" and a retry value.
def test_get_opens_a_stream_starting_with_a_priming_event(session):
    stream = open_get(session)
    try:
        assert stream.status == 200
        assert stream.headers["content-type"].split(";")[0] == SSE
        first = stream.next_event(timeout=TIMEOUT)
    finally:
        stream.close()
    assert first is not None
    assert first.id and first.data == ""
    assert isinstance(first.retry, int) and first.retry > 0


# C1 / F1: the stream response names its session.
def test_get_stream_carries_the_session_id(session):
    stream = open_get(session)
    try:
        assert stream.status == 200
        assert stream.headers["mcp-session-id"] == session.session_id
    finally:
        stream.close()


# A6 / C1: every SSE response disables caching and proxy buffering (GET and POST streams alike).
@pytest.mark.parametrize("kind", ["GET", "POST"])
def test_sse_responses_disable_caching_and_proxy_buffering(session, kind):
    if kind == "GET":
        stream = open_get(session)
    else:
        stream = session.stream("POST", session.message("tools/list"), {"Accept": SSE}, timeout=TIMEOUT)
    try:
        assert stream.status == 200
        assert stream.headers["content-type"].split(";")[0] == SSE
        assert stream.headers["cache-control"] == "no-cache"
        assert stream.headers["x-accel-buffering"] == "no"
    finally:
        stream.close()


# C7 [SDK]: a second concurrent GET stream on one session -> 409.
def test_second_concurrent_get_is_409(session):
    first = open_get(session)
    try:
        assert first.status == 200
        assert first.next_event(timeout=TIMEOUT).data == ""
        assert_rejected(open_get(session), 409)
    finally:
        first.close()


# C7: once the first GET is gone, a new GET is served (the lock goes with the connection).
def test_get_is_served_again_after_the_first_get_closes(session):
    first = open_get(session)
    try:
        assert first.status == 200
        assert first.next_event(timeout=TIMEOUT).data == ""
    finally:
        first.close()
    deadline, status = time.monotonic() + 30.0, None  # a failsafe: the server notices the close when it can
    while time.monotonic() < deadline:
        status = get_status(session)
        if status == 200:
            break
        assert status == 409
        time.sleep(0.05)
    assert status == 200


# C7: the 409 is per session: another session's GET is unaffected.
def test_get_streams_of_different_sessions_do_not_conflict(session, mcp_server):
    other = HttpClient(mcp_server.url)
    other.initialize()
    first = open_get(session)
    try:
        assert first.status == 200
        assert get_status(other) == 200
    finally:
        first.close()


# G2: DELETE ends the session's open GET stream (EOF), and the session is gone.
def test_delete_ends_the_open_get_stream(session):
    stream = open_get(session)
    try:
        assert stream.status == 200
        assert stream.next_event(timeout=TIMEOUT).data == ""
        assert session.delete().status == 200
        assert stream.next_event(timeout=TIMEOUT) is None  # EOF, no further event
    finally:
        stream.close()


# --- Last-Event-ID (E8): never 404, which would make the client re-initialize ---------------------

# E8: a malformed Last-Event-ID -> 400.
@pytest.mark.parametrize("last_event_id", [
    "garbage",
    "g",
    "g.",
    "g.1",
    "0123456789ABCDEF.1-0",      # upper-case hex
    "0123456789abcde.1-0",       # 15 hex digits
    "0123456789abcdef.1-x",
    "0123456789abcdef.١-0",      # a non-ASCII digit
    "x" * 500,
])
def test_malformed_last_event_id_is_400(session, last_event_id):
    assert_rejected(open_get(session, {"Last-Event-ID": last_event_id.encode().decode("latin-1")}), 400)


# E8: a well-formed Last-Event-ID that names no event of this session -> 400.
@pytest.mark.parametrize("last_event_id", ["0123456789abcdef.1-0", "g.99999999999999-0", "g.1-0"])
def test_unknown_last_event_id_is_400(session, last_event_id):
    assert_rejected(open_get(session, {"Last-Event-ID": last_event_id}), 400)


# E7: an event id from session A, presented by session B, replays nothing -> 400.
def test_last_event_id_of_another_session_is_400(session, mcp_server):
    stream = session.stream("POST", session.message("tools/list"), {"Accept": SSE}, timeout=TIMEOUT)
    try:
        events = stream.events(timeout=TIMEOUT)
    finally:
        stream.close()
    foreign_id = events[-1].id
    assert foreign_id
    other = HttpClient(mcp_server.url)
    other.initialize()
    assert_rejected(open_get(other, {"Last-Event-ID": foreign_id}), 400)


# E8: the checks of a plain GET still apply with Last-Event-ID: no session -> 400, unknown -> 404.
def test_last_event_id_does_not_bypass_session_checks(client, mcp_server):
    assert_rejected(open_get(client, {"Last-Event-ID": "g.1-0"}), 400)
    client.session_id = "A" * 32  # well-formed, never issued
    assert_rejected(open_get(client, {"Last-Event-ID": "g.1-0"}), 404)
