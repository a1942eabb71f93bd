"""Hostile clients cost nobody else anything (issue 10): what one client sends never loses,
stalls or breaks another client's work."""
import json
import threading
import time

import pytest
import redis

from mcp_transport.testing import HttpClient

GET = {"Accept": "text/event-stream"}


def _progress_call(client, steps, interval_ms, token="p"):
    return client.message("tools/call", {"name": "slow_progress", "_meta": {"progressToken": token},
                                         "arguments": {"steps": steps, "interval_ms": interval_ms}})


def _lose_streams(server_env, *clients):
    """What a Redis flush does to these sessions' streams."""
    connection = redis.Redis.from_url(server_env["REDIS_URL"])
    for client in clients:
        lost = list(connection.scan_iter(match=f"{server_env['MCP_KEY_PREFIX']}:stream:{client.session_id}:*"))
        if lost:
            connection.delete(*lost)


def _poison(url, stop):
    """An attacker streaming events the database cannot take as they are: NUL in a progress
    token (PostgreSQL's jsonb refuses it), and a number JSON cannot carry."""
    attacker = HttpClient(url)
    attacker.initialize()
    while not stop.is_set():
        for token in ("\u0000", "a\u0000b"):
            attacker.stream("POST", _progress_call(attacker, 20, 2, token)).events()
        raw = b'{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"slow_progress",' \
              b'"arguments":{"steps":3,"interval_ms":1},"_meta":{"progressToken":1e999}}}'
        attacker.request("POST", raw)


def test_another_sessions_events_survive_a_poisoned_batch_and_a_redis_flush(start_server, server_env):
    server = start_server(MCP_TRANSPORT_JSON=json.dumps({"EVENT_STORE": {"OPTIONS": {"flush_interval": 0.05}}}))
    victim = HttpClient(server.url)
    victim.initialize()
    stop = threading.Event()
    attacker = threading.Thread(target=_poison, args=(server.url, stop))
    attacker.start()
    try:
        call = _progress_call(victim, 30, 10)
        stream = victim.stream("POST", call)
        first = stream.events()
    finally:
        stop.set()
        attacker.join()
    _lose_streams(server_env, victim)
    # The same process: its replay writes what its batch still holds first, so every event of the
    # victim's is in the database by now, or was refused with the attacker's.
    resumed = victim.stream("GET", headers={**GET, "Last-Event-ID": first[0].id})
    assert resumed.status == 200, resumed.response.read()
    replayed = resumed.messages()
    assert replayed == [json.loads(event.data) for event in first[1:]]
    assert [m["params"]["progress"] for m in replayed if m.get("method")] == list(range(1, 31))
    assert replayed[-1]["id"] == call["id"] and replayed[-1]["result"]["content"][0]["text"] == "done 30"


def _check_exactly_once(messages, call, steps):
    progress = [m["params"]["progress"] for m in messages if m.get("method") == "notifications/progress"]
    results = [m for m in messages if m.get("id") == call["id"]]
    assert progress == list(range(1, steps + 1)), progress
    assert len(results) == 1 and results[0]["result"]["content"][0]["text"] == f"done {steps}", results


def test_drop_redis_loss_and_resume_on_the_other_process_at_once_50_times(mcp_server, second_server, server_env):
    """The last events before Redis lost the stream are still in the appending process's batch
    (flushed every 0.2 s): a resume on another process waits for them rather than answering 400
    "names no event", and every result arrives exactly once."""
    client = HttpClient(mcp_server.url)
    client.initialize()
    other = client.on(second_server.url)
    for trial in range(50):
        steps = 4
        call = _progress_call(client, steps, 40)
        stream = client.stream("POST", call)
        assert stream.next_event().data == ""  # priming
        seen = [json.loads(stream.next_event().data)] if trial % 2 else []
        stream.close()
        _lose_streams(server_env, client)
        resumed = other.stream("GET", headers={**GET, "Last-Event-ID": stream.decoder.last_event_id})
        assert resumed.status == 200, (trial, resumed.response.read())
        seen += resumed.messages()
        _check_exactly_once(seen, call, steps)


def _events_left(server_env, session_id):
    """Redis stream keys and database rows the session still has."""
    import os
    import subprocess
    import sys

    connection = redis.Redis.from_url(server_env["REDIS_URL"])
    streams = list(connection.scan_iter(match=f"{server_env['MCP_KEY_PREFIX']}:stream:{session_id}:*"))
    code = ("from mcp_transport.models import StoredEvent; "
            f"print(StoredEvent.objects.filter(session_id={session_id!r}).count())")
    out = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], capture_output=True, text=True,
                         env={**os.environ, **server_env}, cwd=server_env["PYTHONPATH"], check=True).stdout
    return len(streams), int(out.strip().splitlines()[-1])


@pytest.mark.parametrize("where", ["same", "other"])
def test_a_delete_right_after_a_cancel_leaves_no_event_behind(mcp_server, second_server, server_env, where):
    """The cancelled call ends with a terminal event, which its process writes once the cancel
    reaches it: after the DELETE, more often than not. Nothing of the session may stay."""
    client = HttpClient(mcp_server.url)
    client.initialize()
    other = client if where == "same" else client.on(second_server.url)
    calls = []
    for _ in range(3):
        call = _progress_call(client, 1000, 20)
        stream = client.stream("POST", call)
        stream.next_event()
        stream.next_event()  # running
        calls.append((call, stream))
    for call, _ in calls:
        cancel = client.message("notifications/cancelled", {"requestId": call["id"]}, request_id=False)
        assert other.request("POST", cancel).status == 202
    assert other.delete().status == 200
    for _, stream in calls:
        stream.events()  # each call's stream ends (cancelled, then closed)
    deadline = time.monotonic() + 3  # the terminal events are written within moments, if at all
    while time.monotonic() < deadline:
        assert _events_left(server_env, client.session_id) == (0, 0)


# -- every input gets a clear answer at the edge --------------------------------------------------

def _post(client, raw, headers=None):
    return client.request("POST", raw.encode() if isinstance(raw, str) else raw, headers)


def _init(params):
    return '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",' + params + '}}'


REFUSED = [  # (body, status, JSON-RPC code), without a session where it starts with initialize
    (_init('"capabilities":{"x":1e999},"clientInfo":{"name":"a","version":"1"}'), 400, -32700),
    (_init('"capabilities":{},"clientInfo":{"name":"\\ud800","version":"1"}'), 400, -32700),
    ('{"jsonrpc":"2.0","id":"\\ud800","result":{}}', 400, -32700),
    ('{"jsonrpc":"2.0","id":18446744073709551616,"result":{}}', 400, -32600),
    ('{"jsonrpc":"2.0","id":18446744073709551616,"method":"ping"}', 400, -32600),
    ('{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"\\udfff"}}', 400, -32700),
    ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":-1e999}}}', 400, -32700),
]

IN_BAND = [  # (method, params, JSON-RPC code or None for a result)
    ("tasks/get", {"taskId": "a\x00"}, -32602),
    ("tasks/cancel", {"taskId": ["x"]}, -32602),
    ("tasks/result", {"taskId": "\x00" * 32}, -32602),
    ("tools/call", {"name": "slow_progress", "arguments": {"steps": 1}, "_meta": {"progressToken": 1.5}}, -32602),
    ("tools/call", {"name": "slow_progress", "arguments": {"steps": 1}, "_meta": {"progressToken": 2**64}}, -32602),
    ("tools/call", {"name": "slow_progress", "arguments": {"steps": 1}, "_meta": []}, -32602),
    ("resources/subscribe", {"uri": "test://a\x00"}, -32002),  # no such resource, as resources/read says
    ("tools/call", {"name": "echo", "arguments": {"text": "a\x00b"}}, None),
]


@pytest.mark.parametrize("raw, status, code", REFUSED)
def test_bad_input_is_refused_with_400(session, raw, status, code):
    client = HttpClient(f"http://{session.host}:{session.port}{session.path}") if '"initialize"' in raw else session
    reply = _post(client, raw)
    assert (reply.status, reply.json["error"]["code"]) == (status, code), reply.body


@pytest.mark.parametrize("method, params, code", IN_BAND)
def test_bad_params_get_an_in_band_error_never_an_internal_one(session, method, params, code):
    reply = session.call(method, params)
    if code is None:
        assert "result" in reply, reply
    else:
        assert reply["error"]["code"] == code, reply


def test_a_session_whose_client_info_holds_nul_is_kept(mcp_server):
    client = HttpClient(mcp_server.url)
    reply = _post(client, _init('"capabilities":{"x":{"y":"\\u0000"}},"clientInfo":{"name":"a\\u0000","version":"1"}'))
    assert reply.status == 200, reply.body
    client.session_id = reply.headers["mcp-session-id"]
    assert client.call("ping")["result"] == {}


def test_a_background_tool_called_with_nul_answers_and_its_resume_too(session, celery_worker):
    call = session.message("tools/call", {"name": "slow_job", "arguments": {"steps": 1, "interval_ms": 1},
                                          "_meta": {"progressToken": "p\x00"}})
    stream = session.stream("POST", call)
    events = stream.events(timeout=30)
    replies = [json.loads(event.data) for event in events if event.data]
    assert replies[-1]["id"] == call["id"] and replies[-1]["result"]["content"][0]["text"] == "done 1"
    assert replies[0]["params"]["progressToken"] == "p\x00"
    resumed = session.stream("GET", headers={**GET, "Last-Event-ID": events[0].id}).messages(timeout=30)
    assert resumed == replies


def test_a_position_beyond_64_bits_is_400_not_503(session):
    reply = session.request("GET", headers={**GET, "Last-Event-ID": "g.99999999999999999999-0"})
    assert reply.status == 400 and reply.json["error"]["code"] == -32600


def test_a_content_type_with_a_vertical_tab_is_answered(session):
    """Found by tests/fuzz: Twisted dropped such a request without a response; now daphne
    refuses the header value itself (400 "Invalid header value")."""
    reply = session.request("POST", session.message("ping"), headers={"Content-Type": b"a\x0bb"})
    assert reply.status == 400
