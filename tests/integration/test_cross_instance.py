"""Two daphne processes sharing Redis and the database: any process serves any session."""
import json

from mcp_transport.testing import HttpClient


def test_session_initialized_on_one_process_is_used_on_another(mcp_server, second_server):
    first = HttpClient(mcp_server.url)
    first.initialize()
    second = first.on(second_server.url)
    reply = second.call("tools/call", {"name": "echo", "arguments": {"text": "across"}})
    assert reply["result"]["structuredContent"] == {"result": "across"}


def test_delete_on_one_process_ends_the_session_on_the_other(mcp_server, second_server):
    first = HttpClient(mcp_server.url)
    first.initialize()
    assert first.on(second_server.url).delete().status == 200
    assert first.request("POST", first.message("ping")).status == 404


def test_log_level_set_on_one_process_applies_on_the_other(mcp_server, second_server):
    first = HttpClient(mcp_server.url)
    first.initialize()
    assert first.call("logging/setLevel", {"level": "error"})["result"] == {}
    stream = first.on(second_server.url).stream("POST", first.message("tools/call", {"name": "test_tool_with_logging"}))
    methods = [m.get("method") for m in stream.messages()]
    assert "notifications/message" not in methods


def test_sampling_answer_posted_to_another_process_reaches_the_tool(mcp_server, second_server):
    first = HttpClient(mcp_server.url)
    first.initialize(capabilities={"sampling": {}})
    stream = first.stream("POST", first.message("tools/call", {"name": "test_sampling",
                                                                "arguments": {"prompt": "hi"}}, request_id=7))
    request = _next_message(stream)
    assert request["method"] == "sampling/createMessage"
    answer = {"jsonrpc": "2.0", "id": request["id"],
              "result": {"role": "assistant", "model": "m", "content": {"type": "text", "text": "from B"}}}
    assert first.on(second_server.url).request("POST", answer).status == 202
    response = _next_message(stream)
    assert response["id"] == 7 and "from B" in response["result"]["content"][0]["text"]
    assert stream.next_event() is None  # the stream ends after the response


def test_dropped_stream_resumes_on_the_other_process_exactly_once(mcp_server, second_server):
    first = HttpClient(mcp_server.url)
    first.initialize()
    call = first.message("tools/call", {"name": "slow_progress", "arguments": {"steps": 8, "interval_ms": 50},
                                         "_meta": {"progressToken": "t"}})
    stream = first.stream("POST", call)
    priming = stream.next_event()
    assert priming.id and priming.data == ""
    seen = [json.loads(stream.next_event().data) for _ in range(2)]
    last_id = stream.decoder.last_event_id
    stream.close()  # the network drops; the tool keeps running
    resumed = first.on(second_server.url).stream("GET", headers={"Accept": "text/event-stream",
                                                               "Last-Event-ID": last_id})
    assert resumed.status == 200
    seen += resumed.messages(timeout=10)
    progress = [m["params"]["progress"] for m in seen if m.get("method") == "notifications/progress"]
    assert progress == list(range(1, 9))
    results = [m for m in seen if m.get("id") == call["id"]]
    assert len(results) == 1 and results[0]["result"]["content"][0]["text"] == "done 8"


def test_cancel_sent_to_another_process_stops_the_tool(mcp_server, second_server):
    first = HttpClient(mcp_server.url)
    first.initialize()
    call = first.message("tools/call", {"name": "slow_progress", "arguments": {"steps": 100, "interval_ms": 50},
                                         "_meta": {"progressToken": 1}})
    stream = first.stream("POST", call)
    stream.next_event()  # priming
    stream.next_event()  # first progress: the tool is running
    cancel = first.message("notifications/cancelled", {"requestId": call["id"]}, request_id=False)
    assert first.on(second_server.url).request("POST", cancel).status == 202
    rest = stream.messages(timeout=5)
    assert all("result" not in m and "error" not in m for m in rest)  # no response after a cancel
    assert len(rest) < 20  # it stopped well before its 100 steps


def _next_message(stream):
    while True:
        event = stream.next_event()
        assert event is not None, "stream ended early"
        if event.data:
            return json.loads(event.data)


def test_concurrent_get_streams_across_processes_conflict(mcp_server, second_server):
    first = HttpClient(mcp_server.url)
    first.initialize()
    headers = {"Accept": "text/event-stream"}
    held = first.stream("GET", headers=headers)
    assert held.status == 200
    assert first.on(second_server.url).stream("GET", headers=headers).status == 409
    held.close()
