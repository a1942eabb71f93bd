"""POST requests answered with SSE, read frame by frame (checklist A9-A11, B1-B3, E1, M3, M4).

Every read has a timeout and every stream is closed in a ``finally``, so nothing hangs.
"""
import json
import time

import pytest

from mcp_transport.testing import HttpClient

SSE = "text/event-stream"
TIMEOUT = 10


def progress_call(client, token, steps=3, interval_ms=10):
    params = {"name": "slow_progress", "arguments": {"steps": steps, "interval_ms": interval_ms}}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return client.message("tools/call", params)


def read_stream(client, message, headers=None):
    """(events, seconds from the last event to EOF) of a POST answered with SSE."""
    stream = client.stream("POST", message, headers, timeout=TIMEOUT)
    try:
        assert stream.status == 200, stream.response.read()
        assert stream.headers["content-type"].split(";")[0] == SSE
        events, last_at = [], time.monotonic()
        while (event := stream.next_event(timeout=TIMEOUT)) is not None:
            events.append(event)
            last_at = time.monotonic()
        return events, time.monotonic() - last_at
    finally:
        stream.close()


def payloads(events):
    return [json.loads(e.data) for e in events if e.data]


# A10 / A9 / A11 / B1 / M3 / M4 / E1: slow_progress with a progressToken answers with SSE: the
# priming event, 3 progress notifications with strictly increasing progress and the exact token
# (an integer stays an integer), then the response as the last event, then EOF; every event has
# its own id.
@pytest.mark.parametrize("token", [7, 0, "tok-7", "ünï-κ"], ids=["int", "zero", "str", "unicode"])
def test_progress_stream_is_priming_then_progress_then_response_then_eof(session, token):
    message = progress_call(session, token)
    events, eof_after = read_stream(session, message)

    priming, *rest = events
    assert priming.id and priming.data == ""                       # B1
    messages = payloads(rest)
    assert len(messages) == len(rest)                               # nothing else without data
    *progress, response = messages
    assert response["id"] == message["id"]                         # A9, the last event (A11)
    assert response["result"]["structuredContent"] == {"result": "done 3"}
    assert [m["method"] for m in progress] == ["notifications/progress"] * 3
    tokens = [m["params"]["progressToken"] for m in progress]
    assert tokens == [token] * 3 and all(type(t) is type(token) for t in tokens)  # M4
    values = [m["params"]["progress"] for m in progress]
    assert all(a < b for a, b in zip(values, values[1:]))           # M3
    ids = [e.id for e in events]
    assert all(ids) and len(set(ids)) == len(ids)                   # E1
    assert eof_after < 1.0                                          # A11: EOF right after the response


# M4: without a progressToken there are no progress notifications, just priming and the response.
def test_progress_tool_without_token_sends_only_the_response(session):
    message = progress_call(session, None)
    events, _ = read_stream(session, message)
    assert events[0].data == ""
    assert [m.get("id") for m in payloads(events)] == [message["id"]]


# B1 [SDK]: sessions of versions before 2025-11-25 get no priming event (older clients would
# choke on the empty data), but still every progress notification and the response.
@pytest.mark.parametrize("version", ["2025-06-18", "2025-03-26"])
def test_streams_of_older_sessions_have_no_priming_event(client, version):
    client.initialize(version=version)
    message = progress_call(client, 1)
    events, _ = read_stream(client, message)
    assert all(e.data for e in events)
    messages = payloads(events)
    assert [m.get("method") for m in messages[:-1]] == ["notifications/progress"] * 3
    assert messages[-1]["id"] == message["id"]


# E1: event ids are unique across all streams of a session (3 concurrent POSTs and a GET).
def test_event_ids_are_unique_across_concurrent_streams(session):
    get = session.stream("GET", None, timeout=TIMEOUT)
    posts = [session.stream("POST", progress_call(session, n, steps=3, interval_ms=20), timeout=TIMEOUT)
             for n in range(3)]
    try:
        assert get.status == 200 and all(p.status == 200 for p in posts)
        ids = [get.next_event(timeout=TIMEOUT).id]
        for post in posts:
            ids += [e.id for e in post.events(timeout=TIMEOUT)]
    finally:
        for stream in (get, *posts):
            stream.close()
    assert len(ids) == 1 + 3 * 5 and all(ids)
    assert len(set(ids)) == len(ids)


# E1 / E7: event ids are unique across sessions too, so one cannot name another's events.
def test_event_ids_differ_between_sessions(session, mcp_server):
    other = HttpClient(mcp_server.url)
    other.initialize()
    first, _ = read_stream(session, session.message("tools/list"), {"Accept": SSE})
    second, _ = read_stream(other, other.message("tools/list"), {"Accept": SSE})
    assert not {e.id for e in first} & {e.id for e in second}


# B2 / B3 / E6: test_reconnection closes its stream before its result: EOF with no response and a
# retry field; a GET with Last-Event-ID then delivers the rest, the response last, then EOF.
def test_closed_post_stream_is_resumed_by_get_with_last_event_id(session):
    message = session.message("tools/call", {"name": "test_reconnection", "arguments": {}})
    stream = session.stream("POST", message, timeout=TIMEOUT)
    try:
        assert stream.status == 200
        before = stream.events(timeout=TIMEOUT)
        raw = stream.raw
    finally:
        stream.close()
    assert before[0].data == "" and before[0].id                   # B1
    assert all(m.get("id") != message["id"] for m in payloads(before))
    last_frame = raw.rsplit(b"\n\n", 2)[-2]
    assert raw.endswith(b"\n\n") and last_frame.startswith(b"retry: ")  # B3: retry just before closing

    resumed = session.stream("GET", None, {"Last-Event-ID": before[-1].id}, timeout=TIMEOUT)
    try:
        assert resumed.status == 200
        after = resumed.events(timeout=TIMEOUT)
    finally:
        resumed.close()
    messages = payloads(after)
    assert messages[-1]["id"] == message["id"] and "result" in messages[-1]
    assert not {e.id for e in before} & {e.id for e in after}       # nothing replayed twice
