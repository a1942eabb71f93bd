"""Streams that survive anything (2025-11-25): resumes on any process, takeovers, dead
processes, polling mode. Two or more daphne processes share Redis and the database."""
import json
import time

import pytest

from mcp_transport.testing import HttpClient

GET = {"Accept": "text/event-stream"}
STEPS = 6


def _progress_call(client, steps=STEPS, interval_ms=60):
    return client.message("tools/call", {"name": "slow_progress", "_meta": {"progressToken": "p"},
                                         "arguments": {"steps": steps, "interval_ms": interval_ms}})


def _check_exactly_once(messages, call, steps=STEPS):
    progress = [m["params"]["progress"] for m in messages if m.get("method") == "notifications/progress"]
    results = [m for m in messages if m.get("id") == call["id"]]
    assert progress == list(range(1, steps + 1)), progress
    assert len(results) == 1 and results[0]["result"]["content"][0]["text"] == f"done {steps}"


@pytest.mark.parametrize("drop_after", [0, 1, 3, STEPS])  # events read before the drop; 0: after priming only
@pytest.mark.parametrize("where", ["other", "same"])  # same: served from the running request's recent frames
def test_drop_at_any_point_and_resume(mcp_server, second_server, drop_after, where):
    client = HttpClient(mcp_server.url)
    client.initialize()
    call = _progress_call(client)
    stream = client.stream("POST", call)
    seen = []
    assert stream.next_event().data == ""  # priming
    while len(seen) < drop_after:
        seen.append(json.loads(stream.next_event().data))
    stream.close()
    resumer = client.on(second_server.url) if where == "other" else client
    resumed = resumer.stream("GET", headers={**GET, "Last-Event-ID": stream.decoder.last_event_id})
    seen += resumed.messages()
    _check_exactly_once(seen, call)
    assert resumed.closed_by_server  # "After the JSON-RPC response has been sent, the server SHOULD terminate the SSE stream"


def test_a_client_further_behind_than_the_recent_frames_gets_the_rest_from_the_store(session):
    """50 events while the client was away, more than a request keeps (RECENT_FRAMES = 32)."""
    call = _progress_call(session, steps=60, interval_ms=20)
    stream = session.stream("POST", call)
    priming = stream.next_event()
    first = json.loads(stream.next_event().data)
    stream.close()
    time.sleep(1.1)
    resumed = session.stream("GET", headers={**GET, "Last-Event-ID": stream.decoder.last_event_id})
    _check_exactly_once([first, *resumed.messages()], call, steps=60)
    assert priming.id != stream.decoder.last_event_id


def test_a_second_resume_on_the_same_process_takes_the_stream_over(session):
    call = _progress_call(session, steps=10, interval_ms=100)
    stream = session.stream("POST", call)
    priming = stream.next_event()
    stream.close()
    first = session.stream("GET", headers={**GET, "Last-Event-ID": priming.id})
    first.next_event(timeout=5)
    second = session.stream("GET", headers={**GET, "Last-Event-ID": priming.id})
    first.events(timeout=5)
    assert first.closed_by_server and b"retry:" in first.raw
    _check_exactly_once(second.messages(), call, steps=10)


def test_resume_after_the_result_replays_it_then_ends(session):
    call = _progress_call(session, steps=2, interval_ms=1)
    stream = session.stream("POST", call)
    priming = stream.next_event()
    stream.close()
    time.sleep(0.5)  # the tool finishes while no connection is attached
    resumed = session.stream("GET", headers={**GET, "Last-Event-ID": priming.id})
    _check_exactly_once(resumed.messages(), call, steps=2)


def test_second_resume_of_a_stream_takes_it_over(mcp_server, second_server):
    client = HttpClient(mcp_server.url)
    client.initialize()
    call = _progress_call(client, steps=10, interval_ms=100)
    stream = client.stream("POST", call)
    priming = stream.next_event()
    stream.close()
    first = client.stream("GET", headers={**GET, "Last-Event-ID": priming.id})
    first_events = [first.next_event(timeout=5)]
    second = client.on(second_server.url).stream("GET", headers={**GET, "Last-Event-ID": priming.id})
    assert second.status == 200
    first_events += first.events(timeout=5)  # the older connection ends, with a retry field
    assert first.closed_by_server and b"retry:" in first.raw
    _check_exactly_once(second.messages(), call, steps=10)  # the newer one gets all from the id on


def test_a_session_deleted_on_the_other_process_cannot_be_resumed_here(mcp_server, second_server):
    """The process that opened the stream remembers its session for a fast resume; a DELETE on
    the other process still makes the resume a 404 there (the ``closed`` control message)."""
    client = HttpClient(mcp_server.url)
    client.initialize()
    stream = client.stream("POST", _progress_call(client, steps=20, interval_ms=100))
    priming = stream.next_event()
    stream.close()
    assert client.on(second_server.url).request("DELETE").status == 200
    time.sleep(0.2)  # the control message crosses Redis pub/sub
    resumed = client.request("GET", headers={**GET, "Last-Event-ID": priming.id})
    assert resumed.status == 404


def test_resume_on_another_process_after_kill_9_gets_an_error_response(start_server):
    fast = {"MCP_TRANSPORT_JSON": json.dumps({"HEARTBEAT_SECONDS": 0.3, "KEEPALIVE_SECONDS": 1})}
    doomed, survivor = start_server(**fast), start_server(**fast)
    client = HttpClient(doomed.url)
    client.initialize()
    call = _progress_call(client, steps=1000, interval_ms=50)
    stream = client.stream("POST", call)
    stream.next_event()
    stream.next_event()
    doomed.kill()  # SIGKILL: no cleanup, the request dies with its process
    resumed = client.on(survivor.url).stream("GET", headers={**GET, "Last-Event-ID": stream.decoder.last_event_id})
    messages = resumed.messages(timeout=15)
    answers = [m for m in messages if m.get("id") == call["id"]]
    assert len(answers) == 1 and answers[0]["error"]["code"] == -32603
    assert "stopped" in answers[0]["error"]["message"]
    assert resumed.closed_by_server


def test_delete_ends_an_open_post_stream(session):
    stream = session.stream("POST", _progress_call(session, steps=200, interval_ms=50))
    stream.next_event()
    assert session.delete().status == 200
    rest = stream.events(timeout=5)
    assert stream.closed_by_server and len(rest) < 50


@pytest.fixture(scope="module")
def polling_servers(start_server):
    polling = {"MCP_TRANSPORT_JSON": json.dumps({"POLL_AFTER_SECONDS": 0, "SSE_RETRY_MS": 50})}
    return start_server(**polling), start_server(**polling)


def test_polling_mode_loses_nothing_across_processes(polling_servers):
    first, second = polling_servers
    client = HttpClient(first.url)
    client.initialize()
    call = _progress_call(client, steps=8, interval_ms=40)
    stream = client.stream("POST", call)
    events = stream.events()
    assert events[0].data == "" and stream.decoder.retry == 50 and stream.closed_by_server
    seen, last_id, polls = [], stream.decoder.last_event_id, 0
    while not any(m.get("id") == call["id"] for m in seen):  # alternate processes on every poll
        polls += 1
        assert polls < 200
        server = (second, first)[polls % 2]
        resumed = client.on(server.url).stream("GET", headers={**GET, "Last-Event-ID": last_id})
        seen += resumed.messages()
        last_id = resumed.decoder.last_event_id or last_id
        time.sleep(0.05)
    _check_exactly_once(seen, call, steps=8)
    assert polls >= 2


@pytest.mark.parametrize("where", ["first", "second"])  # first: the process running the request
def test_in_polling_mode_every_get_ends_after_what_it_has(polling_servers, where):
    """"close the SSE stream after the priming event" (POLL_AFTER_SECONDS = 0) holds for GETs
    too: a resume ends with its replay, without waiting for the tool's next event."""
    first, second = polling_servers
    client = HttpClient(first.url)
    client.initialize()
    started = time.monotonic()
    assert client.stream("GET", headers=GET).events(timeout=2)[0].data == ""  # priming, then the end
    call = _progress_call(client, steps=3, interval_ms=1500)
    stream = client.stream("POST", call)
    stream.events()
    time.sleep(1.7)  # one progress event is in the store; the next comes 1.5 s later
    server = first if where == "first" else second
    resumed = client.on(server.url).stream("GET", headers={**GET, "Last-Event-ID": stream.decoder.last_event_id})
    messages = resumed.messages()
    assert [m["params"]["progress"] for m in messages] == [1] and resumed.closed_by_server
    assert time.monotonic() - started < 2.8  # not held until the second event (at 3 s)


def test_counters_record_resumes_and_replays(mcp_server, server_env):
    import subprocess
    import sys
    import os

    client = HttpClient(mcp_server.url)
    client.initialize()
    stream = client.stream("POST", _progress_call(client, steps=1, interval_ms=1))
    priming = stream.next_event()
    stream.close()
    client.stream("GET", headers={**GET, "Last-Event-ID": priming.id}).events()
    client.request("GET", headers={**GET, "Last-Event-ID": "0123456789abcdef.1-0"})
    time.sleep(6)  # counters are flushed with the next heartbeat (HEARTBEAT_SECONDS = 5)
    code = "from mcp_transport.state.metrics import snapshot_sync; import json; print(json.dumps(snapshot_sync()))"
    out = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], capture_output=True, text=True,
                         env={**os.environ, **server_env}, cwd=server_env["PYTHONPATH"], check=True).stdout
    totals = json.loads(out.strip().splitlines()[-1])
    assert totals["get_resumes"] >= 2
    assert totals["store"]["replay_hits"]["redis"] >= 1 and totals["store"]["replay_failures"]["unknown"] >= 1
    assert totals["sessions_created"] >= 1 and totals["get_requests"] >= totals["get_resumes"]


def test_redis_flushed_mid_call_resume_is_served_from_the_database(start_server, server_env):
    import redis

    server = start_server(MCP_TRANSPORT_JSON=json.dumps({"EVENT_STORE": {"OPTIONS": {"flush_interval": 0.05}}}))
    client = HttpClient(server.url)
    client.initialize()
    call = _progress_call(client, steps=12, interval_ms=80)
    stream = client.stream("POST", call)
    seen = []
    assert stream.next_event().data == ""
    for _ in range(3):
        seen.append(json.loads(stream.next_event().data))
    last_id = stream.decoder.last_event_id
    stream.close()
    time.sleep(0.3)  # the batched writer has put the first events in the database
    connection = redis.Redis.from_url(server_env["REDIS_URL"])
    lost = list(connection.scan_iter(match=f"{server_env['MCP_KEY_PREFIX']}:stream:{client.session_id}:*"))
    assert lost and connection.delete(*lost)  # Redis loses the stream mid-call
    resumed = client.stream("GET", headers={**GET, "Last-Event-ID": last_id})
    seen += resumed.messages()
    _check_exactly_once(seen, call, steps=12)


def test_events_waiting_for_the_database_are_written_at_a_clean_shutdown(start_server, server_env):
    import os
    import subprocess
    import sys

    # Nothing reaches the database on its own during the test: only the shutdown flush can write it.
    options = {"EVENT_STORE": {"OPTIONS": {"flush_interval": 3600, "flush_max": 100000}}}
    server = start_server(MCP_TRANSPORT_JSON=json.dumps(options))
    client = HttpClient(server.url)
    client.initialize()
    call = _progress_call(client, steps=3, interval_ms=1)
    _check_exactly_once(client.stream("POST", call).messages(), call, steps=3)
    server.stop()  # SIGTERM: daphne's clean shutdown
    assert server.process.returncode == 0, server.log()
    code = ("from mcp_transport.models import McpCall, StoredEvent; "
            f"print(StoredEvent.objects.filter(session_id={client.session_id!r}).count(), "
            f"McpCall.objects.filter(session_id={client.session_id!r}).count())")
    out = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], capture_output=True, text=True,
                         env={**os.environ, **server_env}, cwd=server_env["PYTHONPATH"], check=True).stdout
    events, calls = map(int, out.strip().splitlines()[-1].split())
    assert events == 5  # the priming event, 3 progress notifications, the result
    assert calls == 2  # the calls log's rows (initialize and the call), written by then too
