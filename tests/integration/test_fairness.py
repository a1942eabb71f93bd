"""One session's waiting never stalls another's: sync tools waiting for absent clients' answers
(roots/list here) hold no thread another session needs (mcp_transport/methods/threads.py).

Before the lanes, every sync handler of every session shared asyncio's default executor (6
threads on a 2-core machine): eight tools waiting for vanished clients held all of them, and a
victim's resources/read, prompts/get, sync tool or background call waited CLIENT_REQUEST_TIMEOUT
(300 s). The deadlines below are far under that stall and far over a loaded machine's latency.
"""
import json
import time

import pytest

from mcp_transport.testing import HttpClient

from .addresses import ClientAt


#: More waiting sync tools than the old shared executor had threads (min(32, cores + 4)).
ABANDONED = 8
#: Far below the 300 s stall, far above any honest answer on a loaded machine.
DEADLINE = 10.0


@pytest.fixture(scope="module")
def server(start_server):
    return start_server()


def abandon_roots_call(server) -> HttpClient:
    """A session whose sync tool asks the client for its roots, and the client vanishes."""
    client = HttpClient(server.url)
    client.initialize(capabilities={"roots": {}})
    stream = client.stream("POST", client.message("tools/call", {"name": "client_roots", "arguments": {}}))
    while True:  # the tool runs, in its thread, once its roots/list request is out
        event = stream.next_event(timeout=60)
        assert event is not None, stream.raw
        if event.data and '"roots/list"' in event.data:
            break
    stream.close()
    return client


@pytest.fixture(scope="module")
def abandoned(server):
    return [abandon_roots_call(server) for _ in range(ABANDONED)]


def timed(action):
    started = time.monotonic()
    result = action()
    return result, time.monotonic() - started


def test_a_victims_resources_read_answers_while_others_wait_for_absent_clients(server, abandoned):
    victim = HttpClient(server.url)
    victim.initialize()
    reply, took = timed(lambda: victim.call("resources/read", {"uri": "test://static-text"}))
    assert reply["result"]["contents"][0]["text"] == "This is the content of the static text resource."
    assert took < DEADLINE, took


def test_a_victims_prompt_and_sync_tool_answer_too(server, abandoned):
    victim = HttpClient(server.url)
    victim.initialize(capabilities={"roots": {}})
    reply, took = timed(lambda: victim.call("prompts/get", {"name": "test_simple_prompt"}))
    assert "result" in reply and took < DEADLINE, (reply, took)

    # The victim's own sync tool asks for roots and gets the victim's answer.
    message = victim.message("tools/call", {"name": "client_roots", "arguments": {}})
    started = time.monotonic()
    stream = victim.stream("POST", message)
    while (event := stream.next_event(timeout=DEADLINE)) is not None:
        asked = event.data and json.loads(event.data)
        if asked and asked.get("method") == "roots/list":
            answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"roots": [{"uri": "file:///victim"}]}}
            assert victim.request("POST", answer).status == 202
        elif asked and asked.get("id") == message["id"]:
            assert asked["result"]["structuredContent"] == {"result": ["file:///victim"]}
            break
    else:
        raise AssertionError(stream.raw)
    assert time.monotonic() - started < DEADLINE


def test_a_victims_background_call_is_submitted(server, abandoned, celery_worker):
    victim = HttpClient(server.url)
    victim.initialize()
    reply, took = timed(lambda: victim.call("tools/call", {"name": "slow_job",
                                                           "arguments": {"steps": 1, "interval_ms": 1}}))
    assert reply["result"]["content"][0]["text"] == "done 1", reply
    assert took < 60, took  # a worker's start-up is in it; the stall was 300 s


@pytest.fixture(scope="module")
def one_wait_server(start_server):
    """Room for one sync tool waiting on its client in the whole process."""
    return start_server(MCP_TRANSPORT_JSON=json.dumps({"SYNC_WAITING_THREADS": 1}))


def roots_call_text(server, client) -> str:
    """The text of a client_roots call that gets no answer: an error, or '' once it is asked."""
    stream = client.stream("POST", client.message("tools/call", {"name": "client_roots", "arguments": {}}))
    while (event := stream.next_event(timeout=DEADLINE)) is not None:
        message = json.loads(event.data) if event.data else {}
        if message.get("method") == "roots/list":
            stream.close()
            return ""
        if "result" in message:
            return message["result"]["content"][0]["text"]
    raise AssertionError(stream.raw)


def test_past_the_waiting_bound_an_ask_fails_at_once_and_delete_frees_a_wait(one_wait_server):
    holder, other = HttpClient(one_wait_server.url), HttpClient(one_wait_server.url)
    holder.initialize(capabilities={"roots": {}})
    other.initialize(capabilities={"roots": {}})
    assert roots_call_text(one_wait_server, holder) == ""  # waits, in the one waiting place
    text, took = timed(lambda: roots_call_text(one_wait_server, other))
    assert "too many requests waiting" in text and took < DEADLINE, (text, took)

    # The holder's DELETE ends its tool's wait at once (not at CLIENT_REQUEST_TIMEOUT): the place
    # is free again. The cancel reaches the thread through the control channel: wait for it.
    assert holder.delete().status == 200
    deadline = time.monotonic() + DEADLINE
    while (text := roots_call_text(one_wait_server, other)) != "":
        assert "too many requests waiting" in text and time.monotonic() < deadline, text
        time.sleep(0.1)


# -- issue 20 #1: one client with many sessions, and clients that went away -------------------------

def asking(client):
    """A client_roots call of ``client`` once it waits for the answer (its stream open), or the
    text of the error result it got at once."""
    stream = client.stream("POST", client.message("tools/call", {"name": "client_roots", "arguments": {}}))
    while (event := stream.next_event(timeout=DEADLINE)) is not None:
        message = json.loads(event.data) if event.data else {}
        if message.get("method") == "roots/list":
            return stream, message
        if "result" in message:
            stream.close()
            return None, message["result"]["content"][0]["text"]
    raise AssertionError(stream.raw)


def session_at(server, address) -> ClientAt:
    client = ClientAt(server.url, address)
    client.initialize(capabilities={"roots": {}})
    return client


@pytest.fixture(scope="module")
def shared_waits_server(start_server):
    """Four waiting places in the process, two per client address, one per session."""
    return start_server(MCP_TRANSPORT_JSON=json.dumps({
        "SYNC_WAITING_THREADS": 4, "SYNC_WAITING_PER_SESSION": 1, "SYNC_WAITING_PER_CALLER": 2,
        "TRUSTED_PROXIES": ["127.0.0.1"]}))


def test_one_client_with_many_sessions_cannot_take_every_waiting_place(shared_waits_server):
    """Before: SYNC_WAITING_PER_SESSION was the only share, so one client's sessions filled the
    process's SYNC_WAITING_THREADS and every other client's asking tool failed at once."""
    hog = [asking(session_at(shared_waits_server, "10.0.0.1")) for _ in range(4)]
    try:
        waiting = [stream for stream, _ in hog if stream is not None]
        refused = [text for stream, text in hog if stream is None]
        assert len(waiting) == 2, hog
        assert len(refused) == 2 and all("This client has too many requests waiting" in text for text in refused), hog

        victim = session_at(shared_waits_server, "10.0.0.2")
        stream, question = asking(victim)
        assert stream is not None, question  # it waits for the victim's answer: a place was left
        answer = {"jsonrpc": "2.0", "id": question["id"], "result": {"roots": [{"uri": "file:///victim"}]}}
        assert victim.request("POST", answer).status == 202
        reply = [m for m in stream.messages(timeout=DEADLINE) if "result" in m]
        assert reply[0]["result"]["structuredContent"] == {"result": ["file:///victim"]}
    finally:
        for stream, _ in hog:
            if stream is not None:
                stream.close()


@pytest.fixture(scope="module")
def gone_server(start_server):
    """One waiting place; a wait whose stream nobody reads ends after a second."""
    return start_server(MCP_TRANSPORT_JSON=json.dumps({"SYNC_WAITING_THREADS": 1, "CLIENT_GONE_SECONDS": 1}))


def test_a_client_that_disconnected_stops_holding_its_waiting_place(gone_server):
    """Before: a client that vanished without a DELETE kept its place for CLIENT_REQUEST_TIMEOUT
    (300 s), and every other client's asking tool failed at once meanwhile."""
    holder = HttpClient(gone_server.url)
    holder.initialize(capabilities={"roots": {}})
    stream, _ = asking(holder)
    assert stream is not None
    other = HttpClient(gone_server.url)
    other.initialize(capabilities={"roots": {}})
    # While the holder's connection is open it keeps its place, however long: it may answer.
    _, text = asking(other)
    assert "too many requests waiting" in text, text

    stream.close()  # the holder goes away without a word (no DELETE, no resume)
    deadline = time.monotonic() + DEADLINE
    while True:
        waits, text = asking(other)
        if waits is not None:
            waits.close()
            break
        assert "too many requests waiting" in text and time.monotonic() < deadline, text
        time.sleep(0.2)
