"""The app under uvicorn, started with the command of docs/deployment.md ("uvicorn") as written
but for the project's name and the port: both eras, the official SDK client, a resume exactly
once, the body limit, the rows written at a clean shutdown, and the drain on SIGTERM."""
import functools
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcp import Client

from mcp_transport.testing import HttpClient, LiveServer, ModernClient, free_port

from .test_drain import lost_calls, refuses_connections, started_call, started_calls, stop

ROOT = Path(__file__).resolve().parents[2]
ECHO = {"name": "echo", "arguments": {"text": "under uvicorn"}}
GET = {"Accept": "text/event-stream"}
pytestmark = [pytest.mark.filterwarnings("ignore:The logging capability is deprecated")]


def documented_command(port: int) -> list:
    section = (ROOT / "docs" / "deployment.md").read_text().split("\n## uvicorn\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    line = next(line for line in block.splitlines() if line.startswith("uvicorn "))
    argv = shlex.split(line.replace("myproject.asgi", "mcpserver.asgi").replace("--port 8001", f"--port {port}"))
    assert f"--port {port}" in " ".join(argv), line
    return [str(Path(sys.executable).with_name("uvicorn")), *argv[1:]]


class UvicornServer(LiveServer):
    def start(self, timeout=30.0) -> "UvicornServer":
        self.port = free_port()
        self._spawn(documented_command(self.port), "uvicorn-")
        self._wait_until_listening(timeout)
        return self


@pytest.fixture(scope="module")
def start_uvicorn(start_server):
    return functools.partial(start_server, UvicornServer)


@pytest.fixture(scope="module")
def uvicorn_server(start_uvicorn):
    return start_uvicorn()


def progress_call(client, steps):
    return client.message("tools/call", {"name": "slow_progress", "arguments": {"steps": steps, "interval_ms": 30},
                                         "_meta": {"progressToken": "p"}})


def test_both_eras_answer(uvicorn_server):
    session = HttpClient(uvicorn_server.url)
    session.initialize()
    assert session.call("tools/call", ECHO)["result"]["structuredContent"] == {"result": "under uvicorn"}
    reply = ModernClient(uvicorn_server.url).post("tools/call", ECHO)
    assert reply.status == 200 and reply.json["result"]["structuredContent"] == {"result": "under uvicorn"}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_sdk_client_calls_with_progress(uvicorn_server, mode):
    seen = []

    async def on_progress(progress, total, message):
        seen.append(progress)

    async with Client(uvicorn_server.url, mode=mode) as client:
        result = await client.call_tool("slow_progress", {"steps": 4, "interval_ms": 10}, progress_callback=on_progress)
    assert result.content[0].text == "done 4" and seen == [1, 2, 3, 4]


def test_a_dropped_stream_resumes_exactly_once(uvicorn_server):
    client = HttpClient(uvicorn_server.url)
    client.initialize()
    call = progress_call(client, steps=8)
    stream = client.stream("POST", call)
    stream.next_event()  # priming
    seen = [json.loads(stream.next_event().data) for _ in range(2)]
    last_id = stream.decoder.last_event_id
    stream.close()
    resumed = client.stream("GET", headers={**GET, "Last-Event-ID": last_id})
    assert resumed.status == 200
    seen += resumed.messages(timeout=20)
    assert [m["params"]["progress"] for m in seen if m.get("method") == "notifications/progress"] == list(range(1, 9))
    assert len([m for m in seen if m.get("id") == call["id"]]) == 1


def test_the_server_card_and_its_revalidation(uvicorn_server):
    card_url = uvicorn_server.url + "/server-card"
    first = HttpClient(card_url).request("GET", session=False, headers={"Content-Type": None, "Accept": None})
    assert first.status == 200 and first.content_type == "application/mcp-server-card+json"
    assert json.loads(first.body)["remotes"][0]["url"] == uvicorn_server.url
    assert first.headers["access-control-allow-origin"] == "*"
    again = HttpClient(card_url).request("GET", session=False, headers={"If-None-Match": first.headers["etag"]})
    assert (again.status, again.body) == (304, b"") and again.headers["etag"] == first.headers["etag"]


def test_a_body_over_the_limit_is_refused(start_uvicorn):
    server = start_uvicorn(MCP_TRANSPORT_JSON=json.dumps({"MAX_REQUEST_BYTES": 4096}))
    client = HttpClient(server.url)
    client.initialize()
    too_big = client.message("tools/call", {"name": "echo", "arguments": {"text": "x" * 8192}})
    assert client.request("POST", too_big).status == 413
    assert client.call("tools/call", ECHO)["result"]["structuredContent"] == {"result": "under uvicorn"}


def test_events_waiting_for_the_database_are_written_at_a_clean_shutdown(start_uvicorn, server_env):
    # Nothing reaches the database on its own during the test: only the shutdown can write it.
    options = {"EVENT_STORE": {"OPTIONS": {"flush_interval": 3600, "flush_max": 100000}}}
    server = start_uvicorn(MCP_TRANSPORT_JSON=json.dumps(options))
    client = HttpClient(server.url)
    client.initialize()
    messages = client.stream("POST", progress_call(client, steps=3)).messages()
    assert [m.get("method") for m in messages] == ["notifications/progress"] * 3 + [None]
    server.stop()  # SIGTERM: uvicorn's clean shutdown, which then ends by the same signal
    assert server.process.returncode in (0, -signal.SIGTERM) and "Finished server process" in server.log(), server.log()
    code = ("from mcp_transport.models import McpCall, StoredEvent; "
            f"print(StoredEvent.objects.filter(session_id={client.session_id!r}).count(), "
            f"McpCall.objects.filter(session_id={client.session_id!r}).count())")
    out = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], capture_output=True, text=True,
                         env={**os.environ, **server_env}, cwd=ROOT, check=True).stdout
    events, calls = map(int, out.strip().splitlines()[-1].split())
    assert events == 5  # the priming event, 3 progress notifications, the result
    assert calls == 2  # the calls log's rows (initialize and the call)


def test_a_sigterm_drains_as_under_daphne(start_uvicorn, second_server):
    """test_drain.py's rolling deploy, the stopping process a uvicorn: its calls answer (two on
    their open streams, two resumed on a daphne), its GET stream ends with a retry, it exits."""
    stopping = start_uvicorn()
    running = started_calls(stopping.url, 4)
    held = running[0][0].stream("GET", headers=GET)
    assert held.status == 200 and held.next_event().data == ""
    primed = len(held.raw)
    signalled = stop(stopping)
    assert held.events(timeout=10) == [] and b"retry: 1000" in held.raw[primed:]
    refuses_connections(stopping)
    assert lost_calls(running, second_server) == []
    assert stopping.process.wait(30) in (0, -signal.SIGTERM) and time.monotonic() - signalled < 30
    assert "stopping: 4 call(s) running" in stopping.log(), stopping.log()


def test_a_call_past_the_grace_gets_the_error(start_uvicorn):
    stopping = start_uvicorn(MCP_TRANSPORT_JSON=json.dumps({"DRAIN_SECONDS": 1}))
    _client, call, stream, _seen = started_call(stopping.url, steps=600)
    signalled = stop(stopping)
    answer = stream.messages(timeout=30)[-1]
    assert answer["id"] == call["id"] and answer["error"]["code"] == -32000, answer
    assert stopping.process.wait(30) in (0, -signal.SIGTERM) and time.monotonic() - signalled < 1 + 10
