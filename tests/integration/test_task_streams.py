"""``tasks/stream`` (SEP-2694, experimental; the example project turns TASK_STREAMS on) on real
daphne processes, Redis and a Celery worker: a task's events from the event store, resumable with
``after`` on any process, ending with the task; its errors; its retention."""
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from mcpserver.embedded_redis import EmbeddedRedis

from mcp_transport.protocol import task_streams
from mcp_transport.testing import LiveWorker, ModernClient

from .test_auth import manage, new_token
from .test_modern_tasks import ASKS, TASKS, error, poll, result

pytestmark = pytest.mark.usefixtures("celery_worker")

PREFIX = "django-mcp-transport."
RELATED = "io.modelcontextprotocol/related-task"


def start(client, name, arguments, **meta):
    created = result(client.post("tools/call", {"name": name, "arguments": arguments,
                                                "_meta": {"progressToken": "p", **meta}}))
    assert created["resultType"] == "task", created
    return created["taskId"]


def open_stream(client, task_id, **params):
    stream = client.open("tasks/stream", {"taskId": task_id, **params})
    assert stream.status == 200, stream.status
    return stream


def read(stream, stop=lambda event: False):
    """The task events of a stream until ``stop(event)`` says so (no result yet) or its result.
    A reply with no event to send is one JSON message (as any 2026-07-28 reply is)."""
    events = []
    if not stream.headers["content-type"].startswith("text/event-stream"):
        message = json.loads(stream.response.read())
        assert "error" not in message, message
        return events, message["result"]
    while True:
        message = stream.next_message(timeout=30)
        if message.get("method") == "notifications/tasks/event":
            events.append(message["params"])
            if stop(message["params"]):
                return events, None
        else:
            assert "error" not in message, message
            return events, message["result"]


def check_envelopes(events, task_id, first_seq=0):
    assert [event["seq"] for event in events] == list(range(first_seq, first_seq + len(events)))
    for event in events:
        assert event["taskId"] == task_id and event["_meta"][RELATED] == {"taskId": task_id}, event
        assert event["type"].startswith(PREFIX) and isinstance(event["payload"], dict), event


def test_a_task_started_on_one_process_streams_from_another_and_resumes_with_after_on_the_first(
        mcp_server, second_server):
    first, second = ModernClient(mcp_server.url, TASKS), ModernClient(second_server.url, TASKS)
    task_id = start(first, "export_report", {"rows": 8, "delay": 0.2})
    # On the other process: the first events, then the client goes away (the task goes on).
    head_stream = open_stream(second, task_id)
    head, _ = read(head_stream, stop=lambda event: event["seq"] == 3)
    head_stream.close()
    # Back on the first process, after the last event processed: the rest, to the task's end.
    tail, ended = read(open_stream(first, task_id, after=head[-1]["seq"]))
    assert ended["resultType"] == "complete" and set(ended) == {"resultType", "_meta"}, ended
    events = head + tail
    check_envelopes(events, task_id)
    assert events[0]["type"] == PREFIX + "status" and events[0]["payload"] == {"status": "working"}
    assert events[-1]["type"] == PREFIX + "status" and events[-1]["payload"]["status"] == "completed"
    progress = [event["payload"] for event in events[1:-1]]
    assert {event["type"] for event in events[1:-1]} == {PREFIX + "notification"}
    assert [(payload["method"], payload["params"]["progress"]) for payload in progress] == \
        [("notifications/progress", row) for row in range(1, 9)]
    assert poll(first, task_id)["status"] == "completed"
    # Ended: the whole timeline again, the same on either process, and the stream ends at once.
    assert read(open_stream(second, task_id))[0] == events
    assert read(open_stream(first, task_id, after=events[-1]["seq"])) == ([], ended)


def test_a_question_is_an_event_whose_key_tasks_update_answers(mcp_server, second_server):
    asker = ModernClient(mcp_server.url, {**TASKS, **ASKS})
    task_id = start(asker, "confirm_delete", {"filename": "c.txt"})
    stream = open_stream(ModernClient(second_server.url, {**TASKS, **ASKS}), task_id)
    asked, _ = read(stream, stop=lambda event: event["type"] == PREFIX + "input_request")
    (key, question), = asked[-1]["payload"]["inputRequests"].items()
    assert question["method"] == "elicitation/create" and question["params"]["message"] == "Delete c.txt?"
    assert question == poll(asker, task_id, until=("input_required",))["inputRequests"][key]
    result(asker.post("tasks/update", {"taskId": task_id,
                                       "inputResponses": {key: {"action": "accept", "content": {"confirm": True}}}}))
    rest, ended = read(stream)
    check_envelopes(asked + rest, task_id)
    assert rest[-1]["payload"] == {"status": "completed"} and ended["resultType"] == "complete"
    assert poll(asker, task_id)["result"]["content"][0]["text"] == "Deleted c.txt"


def test_closing_the_stream_stops_the_events_not_the_task(mcp_server):
    client = ModernClient(mcp_server.url, TASKS)
    task_id = start(client, "export_report", {"rows": 3, "delay": 0.3})
    stream = open_stream(client, task_id)
    read(stream, stop=lambda event: event["seq"] == 1)
    stream.close()
    task = poll(client, task_id)
    assert task["status"] == "completed" and task["result"]["content"][0]["text"] == "exported 3 rows"


def test_bad_cursors_unknown_tasks_and_the_missing_extension_are_refused_in_one_sentence(mcp_server):
    client = ModernClient(mcp_server.url, TASKS)
    task_id = start(client, "export_report", {"rows": 1, "delay": 0})
    events, _ = read(open_stream(client, task_id))
    for after in (-1, "3", 1.5, True, [], len(events)):
        refused = error(client.post("tasks/stream", {"taskId": task_id, "after": after}))
        assert refused["message"].startswith('"after" '), refused
    assert f"last event so far is {len(events) - 1}" in error(
        client.post("tasks/stream", {"taskId": task_id, "after": 10 ** 30}))["message"]
    error(client.post("tasks/stream", {"taskId": "A" * 32}))
    error(ModernClient(mcp_server.url).post("tasks/stream", {"taskId": task_id}), code=-32021)


def test_callers_stream_only_their_own_tasks(auth_server, server_env):
    owner, other = (ModernClient(auth_server.url, TASKS) for _ in range(2))
    owner.token, other.token = new_token(server_env, "stream-owner"), new_token(server_env, "stream-other")
    task_id = start(owner, "export_report", {"rows": 1, "delay": 0})
    assert error(other.post("tasks/stream", {"taskId": task_id}))["message"] == error(
        other.post("tasks/get", {"taskId": task_id}))["message"]  # as unknown as a task that never was
    assert read(open_stream(owner, task_id))[0][-1]["payload"]["status"] == "completed"


def test_revoking_the_token_ends_the_stream_and_its_resume_is_401(auth_server, server_env):
    """"Receivers MAY close a stream before a task reaches a terminal state": the stream watches
    the token it was opened with, as a listen does, and the client's resume gets the 401."""
    client, owner = ModernClient(auth_server.url, TASKS), ModernClient(auth_server.url, TASKS)
    client.token, owner.token = new_token(server_env, "stream-revoked"), new_token(server_env, "stream-revoked")
    task_id = start(client, "export_report", {"rows": 10_000, "delay": 0.2})  # runs until cancelled
    try:
        stream = open_stream(client, task_id)
        read(stream, stop=lambda event: event["seq"] == 1)
        assert "Revoked." in manage(server_env, "mcp_tokens", "revoke", client.token)
        events, ended = read(stream)
        assert ended["resultType"] == "complete" and all(event["type"] != PREFIX + "status" for event in events)
        assert client.post("tasks/stream", {"taskId": task_id, "after": 1}).status == 401
        assert result(owner.post("tasks/get", {"taskId": task_id}))["status"] == "working"
    finally:
        result(owner.post("tasks/cancel", {"taskId": task_id}))  # the same user's other token


def test_a_cancelled_task_ends_its_stream_with_its_status(mcp_server):
    client = ModernClient(mcp_server.url, TASKS)
    task_id = start(client, "slow_compute", {"seconds": 60})
    stream = open_stream(client, task_id)
    read(stream, stop=lambda event: event["seq"] == 0)
    result(client.post("tasks/cancel", {"taskId": task_id}))
    events, ended = read(stream)
    assert events[-1]["payload"]["status"] == "cancelled" and ended["resultType"] == "complete", events
    assert poll(client, task_id)["status"] == "cancelled"


def test_without_the_setting_the_method_does_not_exist(start_server):
    server = start_server(MCP_TRANSPORT_JSON=json.dumps({"TASK_STREAMS": False}))
    client = ModernClient(server.url, TASKS)
    reply = client.post("tasks/stream", {"taskId": "A" * 32})
    assert reply.status == 404 and reply.json["error"]["code"] == -32601, (reply.status, reply.body)
    assert result(client.post("server/discover"))["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"] == {}


def test_the_extension_stays_exactly_empty_while_on(mcp_server):
    # Not {"eventStreams": {}} (SEP-2694's MAY): the official tasks client library,
    # @modelcontextprotocol/ext-tasks, takes any key in it for "no tasks" (test_ts_client.py).
    discovered = result(ModernClient(mcp_server.url, TASKS).post("server/discover"))
    assert discovered["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"] == {}  # (skills beside it)


# -- retention ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ringed(start_server, server_env, own_queue):
    """A daphne and its own worker whose event store keeps 4 events per stream, in Redis only."""
    settings = json.dumps({"EVENT_STORE": {"OPTIONS": {"persist": "off", "maxlen": 4}}, "HEARTBEAT_SECONDS": 0.3})
    env = {**server_env, "CELERY_QUEUE": own_queue, "LOG_LEVEL": "INFO", "MCP_TRANSPORT_JSON": settings}
    worker = LiveWorker(queue=own_queue, env=env, cwd=server_env["PYTHONPATH"]).start()
    yield start_server(CELERY_QUEUE=own_queue, MCP_TRANSPORT_JSON=settings)
    worker.stop()


def test_events_past_the_stores_retention_are_gone(ringed):
    client = ModernClient(ringed.url, TASKS)
    kept = start(client, "export_report", {"rows": 1, "delay": 0})
    assert len(read(open_stream(client, kept))[0]) == 3  # opening, one progress, the end: all kept
    chatty = start(client, "export_report", {"rows": 10, "delay": 0})
    assert poll(client, chatty)["status"] == "completed"
    for params in ({}, {"after": 2}):
        gone = error(client.post("tasks/stream", {"taskId": chatty, **params}), code=-32010)
        assert gone["data"] == {"reason": "events_gone", "taskId": chatty}, gone
    documented = next(json.loads(block) for block in doc_blocks("json") if "-32010" in block)["error"]
    assert documented["message"] == gone["message"] and set(documented["data"]) == set(gone["data"])


# -- what a resume reads ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def counted(start_server, server_env, own_queue):
    """(server, its Redis): a daphne and its own worker on a Redis of their own (their broker is
    the run's, their queue their own: ``ringed``'s worker takes own_queue's jobs), so that INFO's
    output bytes are what their requests read from it."""
    store, queue = EmbeddedRedis().start(), f"{own_queue}-counted"
    env = {"REDIS_URL": store.url, "CELERY_BROKER_URL": server_env["REDIS_URL"], "CELERY_QUEUE": queue,
           "LOG_LEVEL": "INFO", "MCP_TRANSPORT_JSON": json.dumps({"HEARTBEAT_SECONDS": 3600})}
    worker = LiveWorker(queue=queue, env={**server_env, **env}, cwd=server_env["PYTHONPATH"]).start()
    yield start_server(**env), store
    worker.stop()
    store.stop()


def finished(client, rows) -> tuple:
    """(task id, its events) of an export_report of ``rows`` rows, ended."""
    task_id = start(client, "export_report", {"rows": rows, "delay": 0})
    assert poll(client, task_id)["status"] == "completed"
    events, _ = read(open_stream(client, task_id))
    return task_id, events


def redis_bytes_of(store, send) -> int:
    """The median of what Redis sent while ``send()`` ran, over five runs."""
    stats, sent = redis.Redis.from_url(store.url), []
    for _ in range(5):
        before = stats.info("stats")["total_net_output_bytes"]
        send()
        sent.append(stats.info("stats")["total_net_output_bytes"] - before)
    return statistics.median(sent)


def test_a_resume_reads_what_follows_its_cursor_not_the_stream_before_it(counted):
    """Issue 38: a resume after the last event of a long ended task read the whole job stream
    (Redis's ring, then every row of the database) to answer 280 bytes. Now it reads the entries
    after ``after`` by their index: as little at the end of 2,500 events (Redis's ring trimmed to
    1,000, the rest counted in the database) as at the end of 10."""
    server, store = counted
    client = ModernClient(server.url, TASKS)
    short, short_events = finished(client, 10)
    long, long_events = finished(client, 2_500)
    check_envelopes(long_events, long)
    assert len(long_events) == 2_502 and long_events[-1]["payload"]["status"] == "completed"

    def resume(task_id, after):
        return lambda: read(open_stream(client, task_id, after=after))

    at_the_end = {name: redis_bytes_of(store, resume(task_id, events[-1]["seq"]))
                  for name, task_id, events in (("short", short, short_events), ("long", long, long_events))}
    print("Redis bytes per resume at the end:", at_the_end)
    assert at_the_end["long"] <= at_the_end["short"] + 512, at_the_end
    # Anywhere else, what follows the cursor, whether Redis or the database has it.
    for after in (0, 1_000, 1_499, 1_502, 2_490):
        tail, ended = read(open_stream(client, long, after=after))
        assert tail == long_events[after + 1:] and ended["resultType"] == "complete", after
    ten_events = redis_bytes_of(store, resume(long, long_events[-11]["seq"]))
    assert ten_events < at_the_end["long"] + 10 * len(json.dumps(long_events[-5])) + 1024, ten_events


# -- docs/task-streams.md -------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "task-streams.md").read_text()


def doc_blocks(language) -> list:
    return re.findall(rf"```{language}\n(.*?)```", PAGE, re.S)


def named_block(path) -> str:
    return next(block for block in doc_blocks("python") if block.startswith(f"# {path}\n"))


def test_the_documented_tool_and_setting_are_the_example_projects():
    tool = next(block for block in doc_blocks("python") if "def export_report" in block)
    assert tool in (ROOT / "tools" / "mcp_tools" / "background.py").read_text()
    assert '"TASK_STREAMS": True' in named_block("settings.py") and '"TASK_STREAMS": True' in (
        ROOT / "mcpserver" / "settings.py").read_text()


def test_the_documented_client_follows_a_task_and_resumes_it_on_another_process(mcp_server, second_server,
                                                                                 tmp_path):
    (tmp_path / "task_stream_client.py").write_text(named_block("task_stream_client.py"))
    follow = named_block("follow.py").replace("http://127.0.0.1:8000/mcp", mcp_server.url) \
        .replace("http://127.0.0.1:8001/mcp", second_server.url)
    (tmp_path / "follow.py").write_text(follow)
    done = subprocess.run([sys.executable, "follow.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = [line.split(" ", 2) for line in done.stdout.splitlines()]
    assert [int(seq) for seq, _, _ in lines] == list(range(7)), done.stdout  # "0 to 6", each once
    assert lines[0][1:] == ["django-mcp-transport.status", "{'status': 'working'}"]
    assert lines[-1][1] == "django-mcp-transport.status" and "'status': 'completed'" in lines[-1][2]


def test_the_documented_event_is_shaped_as_a_real_one(mcp_server):
    blocks = [json.loads(block) for block in doc_blocks("json")]  # every one is JSON
    documented = next(block for block in blocks if block.get("method") == "notifications/tasks/event")
    client = ModernClient(mcp_server.url, TASKS)
    events, _ = read(open_stream(client, start(client, "export_report", {"rows": 5, "delay": 0})))
    real = events[documented["params"]["seq"]]
    assert set(real) == set(documented["params"]) and real["type"] == documented["params"]["type"]
    assert set(real["payload"]["params"]) == set(documented["params"]["payload"]["params"])
    assert real["payload"]["params"]["message"] == documented["params"]["payload"]["params"]["message"]
    documented_types = set(re.findall(r"^\| `(django-mcp-transport\.\w+)`", PAGE, re.M))
    assert documented_types == set(task_streams.TYPES)
