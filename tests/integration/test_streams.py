"""SSE streams against real processes: keep-alive, retry, polling, GET-stream notifications."""
import json
import subprocess
import sys

import pytest

from mcp_transport.testing import HttpClient

GET_HEADERS = {"Accept": "text/event-stream"}


@pytest.fixture(scope="module")
def tuned_server(start_server):
    return start_server(MCP_TRANSPORT_JSON=json.dumps({"KEEPALIVE_SECONDS": 0.3, "SSE_RETRY_MS": None}))


def test_idle_stream_sends_keepalive_comments(tuned_server):
    client = HttpClient(tuned_server.url)
    client.initialize()
    stream = client.stream("GET", headers=GET_HEADERS)
    stream.next_event(timeout=5)  # priming
    stream.connection.sock.settimeout(5)
    waited = b""
    while b": ping" not in waited:
        waited += stream.response.read1(1024)
    stream.close()


def test_retry_field_can_be_turned_off(tuned_server):
    client = HttpClient(tuned_server.url)
    client.initialize()
    stream = client.stream("POST", client.message("tools/call", {"name": "slow_progress",
                                                                  "arguments": {"steps": 1, "interval_ms": 1}}))
    stream.events()
    assert b"retry:" not in stream.raw and b"id: " in stream.raw


def test_priming_event_carries_the_configured_retry(session):
    stream = session.stream("GET", headers=GET_HEADERS)
    priming = stream.next_event()
    stream.close()
    assert priming.data == "" and priming.id and priming.retry == 1000


def test_older_protocol_versions_get_no_priming_event(client):
    client.initialize(version="2025-06-18")
    stream = client.stream("POST", client.message("tools/call", {"name": "slow_progress",
                                                                  "arguments": {"steps": 2, "interval_ms": 1}}))
    events = stream.events()
    assert all(event.data for event in events) and all(event.id for event in events)


def test_closed_stream_is_resumed_by_polling(session):
    # SEP-1699: test_reconnection closes its POST stream before the result; GET + Last-Event-ID gets it.
    call = session.message("tools/call", {"name": "test_reconnection", "arguments": {}})
    stream = session.stream("POST", call)
    before = stream.events()
    assert before[0].data == "" and stream.decoder.retry == 1000
    assert not any(json.loads(e.data).get("id") == call["id"] for e in before if e.data)
    resumed = session.stream("GET", headers={**GET_HEADERS, "Last-Event-ID": stream.decoder.last_event_id})
    results = [m for m in resumed.messages() if m.get("id") == call["id"]]
    assert len(results) == 1 and results[0]["result"]["content"]
    assert resumed.closed_by_server


def test_resource_update_goes_to_the_subscribed_sessions_get_stream(session, server_env):
    uri = "test://watched-resource"
    assert session.call("resources/subscribe", {"uri": uri})["result"] == {}
    stream = session.stream("GET", headers=GET_HEADERS)
    stream.next_event()  # priming: the stream is live from here
    _manage_shell(server_env, f"from mcp_transport.methods.notify import resource_updated_sync as f; print(f({uri!r}))")
    update = json.loads(stream.next_event(timeout=10).data)
    stream.close()
    assert update == {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}}


def test_list_changed_reaches_every_open_session(session, server_env):
    stream = session.stream("GET", headers=GET_HEADERS)
    stream.next_event()
    _manage_shell(server_env, "from mcp_transport.methods.notify import list_changed_sync as f; print(f('tools'))")
    notice = json.loads(stream.next_event(timeout=10).data)
    stream.close()
    assert notice["method"] == "notifications/tools/list_changed"


def test_unsubscribed_sessions_get_no_resource_updates(session, server_env):
    uri = "test://watched-resource"
    session.call("resources/subscribe", {"uri": uri})
    session.call("resources/unsubscribe", {"uri": uri})
    stream = session.stream("GET", headers=GET_HEADERS)
    stream.next_event()
    _manage_shell(server_env, f"from mcp_transport.methods.notify import resource_updated_sync as f; print(f({uri!r}))")
    with pytest.raises(TimeoutError):
        stream.next_event(timeout=1)
    stream.close()


def _manage_shell(server_env, code):
    """Run code in a separate Django process on the servers' Redis and database."""
    import os

    subprocess.run([sys.executable, "manage.py", "shell", "-c", code], check=True,
                   env={**os.environ, **server_env}, cwd=server_env["PYTHONPATH"])
