"""Event ids are meaningful only inside their own session: the GHSA-84j6-jc92-77jm class.

The attacks: guess a stream id from the client's request id, name the GET stream the way
other servers do (``_GET_stream``), or present session A's real event id with session B.
Every one gets 400 (never 404, never A's data).
"""
import pytest

from mcp_transport.testing import HttpClient

GET = {"Accept": "text/event-stream"}


def _run_call(client, request_id):
    call = client.message("tools/call", {"name": "slow_progress", "_meta": {"progressToken": "secret"},
                                         "arguments": {"steps": 3, "interval_ms": 1}}, request_id=request_id)
    stream = client.stream("POST", call)
    events = stream.events()
    return [e.id for e in events]


@pytest.fixture
def victim_ids(mcp_server):
    victim = HttpClient(mcp_server.url)
    victim.initialize()
    return _run_call(victim, request_id=1)


@pytest.mark.parametrize("guess", ["1", "1.1-0", "0.1-0", "_GET_stream", "_GET_stream.1-0", "g.0-0",
                                   "0000000000000001.1-0", "../g.1-0", "g.1-0\x00"])
def test_guessed_event_ids_are_rejected(session, victim_ids, guess):
    reply = session.request("GET", headers={**GET, "Last-Event-ID": guess})
    assert reply.status == 400
    assert b"secret" not in reply.body


def test_another_sessions_event_ids_replay_nothing(session, victim_ids):
    _run_call(session, request_id=1)  # the same request id in both sessions
    for event_id in victim_ids:
        reply = session.request("GET", headers={**GET, "Last-Event-ID": event_id})
        assert reply.status == 400, event_id
        assert b"secret" not in reply.body and b"done 3" not in reply.body


def test_a_stream_replays_only_its_own_events(session):
    first = _run_call(session, request_id="a")
    second = _run_call(session, request_id="b")
    replayed = session.stream("GET", headers={**GET, "Last-Event-ID": first[0]}).messages()
    assert [m["id"] for m in replayed if "id" in m] == ["a"]
    assert set(second).isdisjoint(first)


def test_concurrent_sessions_with_identical_request_ids_never_mix(mcp_server):
    clients = [HttpClient(mcp_server.url) for _ in range(4)]
    streams = []
    for index, client in enumerate(clients):
        client.initialize()
        call = client.message("tools/call", {"name": "slow_progress", "_meta": {"progressToken": index},
                                             "arguments": {"steps": 5, "interval_ms": 20}}, request_id=1)
        streams.append(client.stream("POST", call))
    for index, stream in enumerate(streams):
        priming = stream.next_event()
        stream.close()
        resumed = clients[index].stream("GET", headers={**GET, "Last-Event-ID": priming.id}).messages()
        tokens = {m["params"]["progressToken"] for m in resumed if m.get("method") == "notifications/progress"}
        assert tokens == {index}
        results = [m for m in resumed if m.get("id") == 1]
        assert len(results) == 1 and results[0]["result"]["content"][0]["text"] == "done 5"
