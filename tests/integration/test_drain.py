"""A rolling deploy loses no call: SIGTERM to one of two daphnes on one Redis while calls run on
it. The stopped process takes no new connection, ends its held streams with a retry, lets its
calls answer (on their open responses, or through the event store to a client that resumed on
the other process), answers the ones still running at DRAIN_SECONDS with an error, and exits.
uvicorn's drain is in test_uvicorn.py."""
import http.client
import json
import os
import signal
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from mcp import Client

from mcp_transport.testing import HttpClient, ModernClient

from .test_auth import LISTEN
from .test_haproxy import front
from .test_http_sse import SseConnection
from .test_modern_tasks import TASKS
from .test_task_streams import open_stream, read, start
from .waiting import eventually

GET = {"Accept": "text/event-stream"}
STEPS, INTERVAL_MS = 40, 100  # each call runs 4 s
pytestmark = [pytest.mark.filterwarnings("ignore:The logging capability is deprecated")]


@pytest.fixture(scope="module")
def other(start_server):
    """The process that stays."""
    return start_server()


def stop(server) -> float:
    """SIGTERM, as a deploy sends it; the moment it was sent."""
    os.kill(server.process.pid, signal.SIGTERM)
    return time.monotonic()


def refuses_connections(server) -> None:
    """The process no longer listens (a load balancer sends new connections elsewhere)."""
    def check():
        try:
            socket.create_connection(("127.0.0.1", server.port), timeout=1).close()
        except ConnectionRefusedError:
            return
        raise AssertionError("still listening")
    eventually(check, deadline=10, every=0.05)


def progress_call(client, steps=STEPS, interval_ms=INTERVAL_MS):
    return client.message("tools/call", {"name": "slow_progress", "_meta": {"progressToken": "p"},
                                         "arguments": {"steps": steps, "interval_ms": interval_ms}})


def started_call(url, steps=STEPS):
    """A session on ``url`` and a call of it that runs: its stream, after its first progress."""
    client = HttpClient(url)
    client.initialize()
    call = progress_call(client, steps)
    stream = client.stream("POST", call)
    assert stream.next_event().data == ""  # priming
    seen = [stream.next_message()]
    assert seen[0]["method"] == "notifications/progress"
    return client, call, stream, seen


def finish(client, call, stream, seen, other, resume=False) -> list:
    """Every message of the call the client gets: read on, and (as the SDK client does) resume
    on the other process from the last event when the connection drops before the answer."""
    while True:
        if resume:
            stream = client.on(other.url).resume(stream.last_event_id)
            assert stream.status == 200
        try:
            seen += stream.messages(timeout=30)
        except (OSError, http.client.HTTPException, ValueError):  # the connection broke
            pass
        if any(m.get("id") == call["id"] for m in seen) or resume:
            return seen
        resume = True


def answered_exactly_once(messages, call, steps=STEPS) -> bool:
    progress = [m["params"]["progress"] for m in messages if m.get("method") == "notifications/progress"]
    results = [m for m in messages if m.get("id") == call["id"]]
    return progress == list(range(1, steps + 1)) and len(results) == 1 and \
        results[0].get("result", {}).get("content", [{}])[0].get("text") == f"done {steps}"


def started_calls(url, count) -> list:
    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(lambda _: started_call(url), range(count)))


def lost_calls(running, other) -> list:
    """The ids of the ``running`` calls that got no answer exactly once, when half their clients
    lose their connection now and resume on ``other`` (which reads what the stopping process
    still writes from the event store) and the others read on."""
    dropped = running[len(running) // 2:]
    for _client, _call, stream, _seen in dropped:
        stream.close()
    with ThreadPoolExecutor(len(running)) as pool:
        outcomes = list(pool.map(lambda entry: finish(*entry, other, resume=entry in dropped), running))
    return [call["id"] for (_, call, _, _), messages in zip(running, outcomes)
            if not answered_exactly_once(messages, call)]


def test_a_sigterm_during_ten_calls_loses_none(start_server, other):
    stopping = start_server()
    running = started_calls(stopping.url, 10)
    signalled = stop(stopping)
    refuses_connections(stopping)
    assert len(lost_calls(running, other)) == 0
    assert stopping.process.wait(30) == 0
    assert time.monotonic() - signalled < 30  # DRAIN_SECONDS
    assert "stopping: 10 call(s) running" in stopping.log(), stopping.log()
    assert "orphan" not in stopping.log() + other.log()
    fresh = HttpClient(other.url)  # meanwhile the other process serves as before
    fresh.initialize()
    assert fresh.call("tools/call", {"name": "echo", "arguments": {"text": "hi"}})["result"]["content"][0]["text"] == "hi"


def test_calls_past_the_grace_get_the_error_in_both_eras(start_server, other):
    stopping = start_server(MCP_TRANSPORT_JSON=json.dumps({"DRAIN_SECONDS": 1}))
    direct = started_call(stopping.url, steps=600)
    resumed = started_call(stopping.url, steps=600)
    modern = ModernClient(stopping.url).open("tools/call", {"name": "slow_progress",
                                                            "arguments": {"steps": 600, "interval_ms": 100},
                                                            "_meta": {"progressToken": "m"}})
    assert modern.next_message()["method"] == "notifications/progress"
    signalled = stop(stopping)
    resumed[2].close()
    on_other = resumed[0].on(other.url).resume(resumed[2].last_event_id).messages(timeout=30)
    answers = {"2025-11-25": direct[2].messages(timeout=30)[-1], "resumed elsewhere": on_other[-1],
               "2026-07-28": modern.messages(timeout=30)[-1]}
    for era, answer in answers.items():
        assert answer["error"]["code"] == -32000, (era, answer)
        assert "was stopped" in answer["error"]["message"] and "1 s" in answer["error"]["message"], (era, answer)
    assert answers["2025-11-25"]["id"] == direct[1]["id"] and answers["resumed elsewhere"]["id"] == resumed[1]["id"]
    assert stopping.process.wait(30) == 0
    assert time.monotonic() - signalled < 1 + 10  # the grace, then at most 5 s for answers, 5 s for connections


def test_held_streams_end_with_a_retry_and_new_requests_go_elsewhere(start_server, other):
    stopping = start_server()
    client, call, stream, seen = started_call(stopping.url)  # keeps the process draining for 4 s
    held = client.stream("GET", headers=GET)
    assert held.status == 200 and held.next_event().data == ""  # the session's GET stream, primed
    primed = len(held.raw)
    idle = http.client.HTTPConnection("127.0.0.1", stopping.port)  # a kept-alive connection, idle
    idle.request("POST", "/mcp", json.dumps(client.message("ping")), client.headers())
    assert idle.getresponse().read() and idle.sock is not None
    arriving = socket.create_connection(("127.0.0.1", stopping.port))  # a request under way
    ping = json.dumps(client.message("ping")).encode()
    headers = {**client.headers(), "Host": "127.0.0.1", "Content-Length": len(ping), "Expect": "100-continue"}
    arriving.sendall(("POST /mcp HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n").encode())
    arriving.settimeout(10)
    assert arriving.recv(65536).startswith(b"HTTP/1.1 100 Continue")  # its headers are in
    stop(stopping)
    assert held.events(timeout=10) == [] and b"retry: 1000" in held.raw[primed:]  # ended, with the spec's retry
    idle.sock.settimeout(10)
    assert idle.sock.recv(1) == b""  # closed by the server
    arriving.sendall(ping)
    refusal = b""
    while chunk := arriving.recv(65536):  # the server closes the connection after its answer
        refusal += chunk
    head, _, body = refusal.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503"), refusal
    assert b"retry-after: 1" in head.lower() and b"connection: close" in head.lower(), refusal
    assert json.loads(body)["error"]["code"] == -32000
    refuses_connections(stopping)
    resumed = client.on(other.url).resume(held.last_event_id)  # the GET stream goes on elsewhere
    assert resumed.status == 200
    resumed.close()
    assert answered_exactly_once(seen + stream.messages(timeout=30), call)  # the call was not disturbed
    assert stopping.process.wait(30) == 0


def test_2026_calls_finish_on_their_open_responses(start_server):
    stopping = start_server()

    def started(_):
        response = ModernClient(stopping.url).open("tools/call", {"name": "slow_progress",
                                                                  "arguments": {"steps": STEPS, "interval_ms": INTERVAL_MS},
                                                                  "_meta": {"progressToken": "m"}})
        return [response.next_message()], response

    with ThreadPoolExecutor(4) as pool:
        running = list(pool.map(started, range(4)))
    stop(stopping)
    with ThreadPoolExecutor(4) as pool:
        outcomes = list(pool.map(lambda entry: entry[0] + entry[1].messages(timeout=30), running))
    for messages in outcomes:
        assert [m["params"]["progress"] for m in messages[:-1]] == list(range(1, STEPS + 1))
        assert messages[-1]["result"]["content"][0]["text"] == f"done {STEPS}", messages[-1]
    assert stopping.process.wait(30) == 0


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # 2025-11-25 sessions, 2026-07-28
async def test_the_sdk_client_through_haproxy_gets_its_results(start_server, other, tmp_path, mode):
    """The documented haproxy configuration, every request to the stopping process while it
    listens (``balance first``): its calls answer there; what the clients send meanwhile (a
    GET stream reconnecting, the session's DELETE) goes to the other process."""
    import asyncio

    stopping = start_server()
    proxy, url = front([stopping, other], tmp_path, balance="first")
    progressed = asyncio.Event()

    async def call():
        async def on_progress(progress, total, message):
            progressed.set()

        async with Client(url, mode=mode) as client:
            result = await client.call_tool("slow_progress", {"steps": 20, "interval_ms": 100},
                                            progress_callback=on_progress)
            return result.content[0].text

    try:
        calls = [asyncio.ensure_future(call()) for _ in range(3)]
        await asyncio.wait_for(progressed.wait(), 30)
        stop(stopping)
        assert await asyncio.wait_for(asyncio.gather(*calls), 30) == ["done 20"] * 3
        assert await asyncio.to_thread(stopping.process.wait, 30) == 0
        assert "stopping: 3 call(s) running" in stopping.log(), stopping.log()
    finally:
        proxy.terminate()
        proxy.wait(10)


def test_background_jobs_are_untouched(start_server, start_worker, other):
    start_worker()
    stopping = start_server()
    client = HttpClient(stopping.url)
    client.initialize()
    call = client.message("tools/call", {"name": "slow_job", "_meta": {"progressToken": "j"},
                                         "arguments": {"steps": 20, "interval_ms": 100}})
    stream = client.stream("POST", call)
    assert stream.next_event().data == ""
    seen = [stream.next_message()]
    primed = len(stream.raw)
    signalled = stop(stopping)
    seen += stream.messages(timeout=10)  # the job's stream ends here with a retry: the job goes on
    assert b"retry: 1000" in stream.raw[primed:] and all("id" not in m or "method" in m for m in seen), seen
    assert stopping.process.wait(30) == 0 and time.monotonic() - signalled < 10
    seen += client.on(other.url).resume(stream.last_event_id).messages(timeout=30)
    progress = [m["params"]["progress"] for m in seen if m.get("method") == "notifications/progress"]
    results = [m for m in seen if m.get("id") == call["id"]]
    assert progress == list(range(1, 21)) and len(results) == 1, seen
    assert results[0]["result"]["content"][0]["text"] == "done 20", results


def test_listens_task_streams_and_http_sse_streams_end_and_go_on_elsewhere(start_server, celery_worker, other):
    """A 2026-07-28 listen and task stream end at once, gracefully (the task goes on: the client
    resumes its events with ``after`` on the other process); an HTTP+SSE stream ends last, with
    a retry, once the calls running here have answered."""
    stopping = start_server()
    _client, call, stream, seen = started_call(stopping.url)  # keeps the process draining for 4 s
    listen = ModernClient(stopping.url).open("subscriptions/listen", LISTEN)
    assert listen.next_message()["method"] == "notifications/subscriptions/acknowledged"
    tasks = ModernClient(stopping.url, TASKS)
    task_id = start(tasks, "export_report", {"rows": 20, "delay": 0.2})
    head, _ = read(open_stream(tasks, task_id), stop=lambda event: event["seq"] == 1)
    task_stream = open_stream(tasks, task_id, after=1)
    legacy = SseConnection(stopping)
    assert legacy.next().event == "endpoint"
    stop(stopping)
    assert listen.messages(timeout=10)[-1]["result"]["resultType"] == "complete"
    middle, ended = read(task_stream)
    assert ended["resultType"] == "complete" and stopping.process.poll() is None  # before the call's end
    tail, ended = read(open_stream(ModernClient(other.url, TASKS), task_id, after=(head + middle)[-1]["seq"]))
    events = head + middle + tail
    assert [event["seq"] for event in events] == list(range(len(events)))
    assert events[-1]["payload"]["status"] == "completed", events[-1]
    assert answered_exactly_once(seen + stream.messages(timeout=30), call)
    rest = b""
    while chunk := legacy.response.read1(65536):
        rest += chunk
    assert rest.endswith(b"retry: 1000\n\n"), rest[-200:]
    assert stopping.process.wait(30) == 0
