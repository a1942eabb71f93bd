"""Background tools: a real Celery worker process runs them, real daphne processes serve them."""
import json
import os

import pytest
from mcp import Client, types

from mcp_transport.testing import HttpClient

from .waiting import settled


@pytest.fixture(autouse=True)
def _worker(celery_worker):
    return celery_worker


def _job_call(client, name="slow_job", token="p", **arguments):
    params = {"name": name, "arguments": arguments}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return client.message("tools/call", params)


def _progress(messages):
    return [m["params"]["progress"] for m in messages if m.get("method") == "notifications/progress"]


def _answers(messages, call):
    return [m for m in messages if m.get("id") == call["id"] and "method" not in m]


@pytest.mark.asyncio
async def test_progress_of_a_background_tool_reaches_the_sdk_client(mcp_server):
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, total, message))

    async with Client(mcp_server.url, mode="legacy") as client:
        result = await client.call_tool("slow_job", {"steps": 5, "interval_ms": 20}, progress_callback=on_progress)
    assert result.is_error is not True
    assert result.structured_content == {"result": "done 5"}
    assert [p for p, _, _ in seen] == [1, 2, 3, 4, 5]
    assert seen[-1] == (5, 5, "step 5")


def test_background_call_answers_exactly_once_over_sse(session):
    call = _job_call(session, steps=3, interval_ms=10)
    stream = session.stream("POST", call)
    assert stream.headers["content-type"] == "text/event-stream"
    messages = stream.messages()
    assert _progress(messages) == [1, 2, 3]
    answers = _answers(messages, call)
    assert len(answers) == 1 and answers[0]["result"]["structuredContent"] == {"result": "done 3"}


def test_dropped_stream_resumes_on_the_other_web_process(mcp_server, second_server):
    first = HttpClient(mcp_server.url)
    first.initialize()
    call = _job_call(first, steps=8, interval_ms=60)
    stream = first.stream("POST", call)
    assert stream.next_event().data == ""  # priming
    seen = [json.loads(stream.next_event().data) for _ in range(2)]
    seen += [json.loads(e.data) for e in stream._pending if e.data]  # read, not yet taken
    stream.close()  # the network drops; the job keeps running in the worker
    resumed = first.on(second_server.url).stream("GET", headers={"Accept": "text/event-stream",
                                                               "Last-Event-ID": stream.decoder.last_event_id})
    seen += resumed.messages(timeout=10)
    assert _progress(seen) == list(range(1, 9))
    answers = _answers(seen, call)
    assert len(answers) == 1 and answers[0]["result"]["structuredContent"] == {"result": "done 8"}


def test_killing_the_web_process_that_accepted_the_call_loses_nothing(start_server, second_server):
    doomed = start_server()
    client = HttpClient(doomed.url)
    client.initialize()
    call = _job_call(client, steps=10, interval_ms=60)
    stream = client.stream("POST", call)
    stream.next_event()
    first = stream.next_event()
    doomed.kill()  # SIGKILL: the web process goes; the job lives in the worker
    # Everything the client has read: the decoder may hold more events than were taken.
    messages = [json.loads(e.data) for e in (first, *stream._pending) if e.data]
    resumed = client.on(second_server.url).stream("GET", headers={"Accept": "text/event-stream",
                                                                "Last-Event-ID": stream.decoder.last_event_id})
    messages += resumed.messages(timeout=10)
    assert _progress(messages) == list(range(1, 11))
    answers = _answers(messages, call)
    assert len(answers) == 1 and answers[0]["result"]["structuredContent"] == {"result": "done 10"}


def test_cancel_on_the_other_web_process_stops_the_worker(mcp_server, second_server):
    first = HttpClient(mcp_server.url)
    first.initialize()
    key = f"ticks-{first.session_id}"
    call = _job_call(first, "tick_job", key=key, steps=2000, interval_ms=50)
    stream = first.stream("POST", call)
    stream.next_event()
    stream.next_event()  # the first tick: the tool runs in the worker
    cancel = first.message("notifications/cancelled", {"requestId": call["id"]}, request_id=False)
    assert first.on(second_server.url).request("POST", cancel).status == 202
    rest = stream.messages(timeout=60)
    assert _answers(rest, call) == []  # no response after a cancel: the stream just ends
    assert stream.closed_by_server
    # The worker sees the cancel at its next tick; left running it would count to 2,000 (100 s).
    assert settled(key) < 2000


@pytest.mark.asyncio
async def test_elicitation_from_a_worker_reaches_the_client_and_back(mcp_server):
    async def elicit(context, params):
        assert params.message == "Ship it?"
        return types.ElicitResult(action="accept", content={"confirm": True})

    async with Client(mcp_server.url, mode="legacy", elicitation_callback=elicit) as client:
        result = await client.call_tool("confirm_job", {"question": "Ship it?"})
    assert result.is_error is not True
    assert result.content[0].text == "confirmed"


def test_exposed_celery_task_runs_as_a_background_tool(session):
    reply = session.call("tools/call", {"name": "word_count", "arguments": {"text": "one two three four", "every": 2},
                                        "_meta": {"progressToken": 9}})
    assert reply["result"]["structuredContent"] == {"result": 4}


def test_soft_time_limit_gives_an_error_result(session):
    reply = session.call("tools/call", {"name": "soft_limited_job", "arguments": {"seconds": 10}})
    assert reply["result"]["isError"] is True
    assert "soft time limit of 1 s" in reply["result"]["content"][0]["text"]


def test_tick_job_writes_only_its_own_counters_never_a_cache_key_it_is_given(session):
    """Issue 20 #7: tick_job wrote whatever cache key it was given (the authorization server's
    per-address registration counter, say), lifting that limit for anyone who may call tools."""
    from django.core.cache import cache

    from tools.bounds import counter_key

    victim = f"victim-{session.session_id}"
    cache.set(victim, 5, timeout=600)
    reply = session.call("tools/call", {"name": "tick_job", "arguments": {"key": victim, "steps": 1, "interval_ms": 0}})
    assert reply["result"]["structuredContent"] == {"result": 1}
    assert cache.get(victim) == 5 and cache.get(counter_key(victim)) == 1

    # Shaped like the registration counter, for an address (TEST-NET-3) no other test registers
    # from: the suite runs in parallel, and 127.0.0.1's real counter moves with other files.
    shaped_like_a_key = f"mcp:oauth:registrations:203.0.113.{os.getpid() % 250}"
    reply = session.call("tools/call", {"name": "tick_job",
                                        "arguments": {"key": shaped_like_a_key, "steps": 1, "interval_ms": 0}})
    assert reply["result"]["isError"] is True and "key" in reply["result"]["content"][0]["text"], reply
    assert cache.get(shaped_like_a_key) is None


@pytest.mark.parametrize("arguments", [{"steps": 1, "interval_ms": 3_600_000}, {"steps": 10**9, "interval_ms": 0},
                                       {"steps": 1, "interval_ms": -1}])
def test_slow_job_refuses_unbounded_arguments_before_it_is_queued(session, arguments):
    reply = session.call("tools/call", {"name": "slow_job", "arguments": arguments})
    assert reply["result"]["isError"] is True, reply
    assert "Invalid arguments for tool slow_job" in reply["result"]["content"][0]["text"]
