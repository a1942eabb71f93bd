"""The 2024-11-05 HTTP+SSE transport (GET /sse + POST /messages) on real daphne processes, driven
by the official Python SDK's sse_client, the TypeScript SDK 1.x SSEClientTransport (node), and raw
HTTP for exact status codes and frames; a drop and resume on another process loses nothing."""
import http.client
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis
from asgiref.sync import async_to_sync
from mcp import Client
from mcp.client.sse import sse_client

from mcp_transport.connections import keys
from mcp_transport.protocol.sse import SseDecoder
from mcp_transport.storage import get_event_store

ROOT = Path(__file__).resolve().parents[2]
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2024-11-05", "capabilities": {},
                         "clientInfo": {"name": "raw-sse-test", "version": "0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def sse_url(server) -> str:
    return f"http://127.0.0.1:{server.port}/sse"


class SseConnection:
    """A raw GET /sse, read event by event (event, id and data)."""

    def __init__(self, server, headers=None, timeout=30):
        self.connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
        self.connection.request("GET", "/sse", headers={"Accept": "text/event-stream", **(headers or {})})
        self.response = self.connection.getresponse()
        self.decoder, self.pending = SseDecoder(), []

    def next(self):
        while not self.pending:
            chunk = self.response.read1(65536)
            assert chunk, "the server ended the stream"
            self.pending.extend(self.decoder.feed(chunk))
        return self.pending.pop(0)

    def message(self):
        event = self.next()
        assert event.event == "message", event
        return json.loads(event.data), event.id

    def close(self):
        self.connection.sock.shutdown(2)
        self.connection.close()


def post(server, path, body, headers=None):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    connection.request("POST", path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
    response = connection.getresponse()
    reply = response.status, response.read(), dict(response.getheaders())
    connection.close()
    return reply


def open_session(server):
    """GET /sse, then initialize through POST /messages: (stream, messages path)."""
    stream = SseConnection(server)
    assert stream.response.status == 200
    endpoint = stream.next()
    assert endpoint.event == "endpoint" and endpoint.data.startswith("/messages?session_id=")
    assert post(server, endpoint.data, INITIALIZE)[0] == 202
    reply, _ = stream.message()
    assert reply["result"]["protocolVersion"] == "2024-11-05"
    assert post(server, endpoint.data, INITIALIZED)[0] == 202
    return stream, endpoint.data


def session_of(path):
    return path.split("session_id=")[1]


def wait_until_answered(session_id, timeout=60.0):
    """Until every request stream of the session has its final event in the store (read from
    this process: the same Redis and key prefix as the servers)."""
    client = redis.Redis.from_url(os.environ["REDIS_URL"], decode_responses=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stream_keys = client.lrange(keys().opened_streams(session_id), 1, -1)
        events = [async_to_sync(get_event_store().read_after)(session_id, key, "0-0") for key in stream_keys]
        if stream_keys and all(any(event.final for event in stream) for stream in events):
            return
        time.sleep(0.05)
    raise AssertionError(f"the requests of {session_id} were not answered in {timeout}s: {stream_keys} {events}")


# -- the official Python SDK's client ----------------------------------------------------------

@pytest.mark.asyncio
@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
async def test_python_sdk_client_lists_calls_and_gets_progress_and_logs(mcp_server):
    progress, logs = [], []

    async def on_progress(value, total, message):
        progress.append(value)

    async def on_log(params):
        logs.append(params.data)

    # "auto" probes server/discover first; its error makes the SDK fall back to initialize.
    async with Client(sse_client(sse_url(mcp_server)), mode="auto", logging_callback=on_log) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        echoed = await client.call_tool("echo", {"text": "über SSE"})
        result = await client.call_tool("slow_progress", {"steps": 4, "interval_ms": 10}, progress_callback=on_progress)
        await client.set_logging_level("debug")
        await client.call_tool("test_tool_with_logging", {})
        text = await client.read_resource("test://static-text")
    assert {"echo", "slow_progress", "slow_job"} <= names
    assert echoed.structured_content == {"result": "über SSE"}
    assert result.content[0].text == "done 4" and progress == [1, 2, 3, 4]
    assert len(logs) == 3 and text.contents[0].text


@pytest.mark.asyncio
async def test_python_sdk_client_runs_a_background_tool_in_the_worker(mcp_server, celery_worker):
    progress = []

    async def on_progress(value, total, message):
        progress.append(value)

    async with Client(sse_client(sse_url(mcp_server)), mode="legacy") as client:
        result = await client.call_tool("slow_job", {"steps": 4, "interval_ms": 20}, progress_callback=on_progress)
    assert result.content[0].text == "done 4" and progress == [1, 2, 3, 4]


# -- raw HTTP --------------------------------------------------------------------------------

def test_the_endpoint_event_comes_first_and_every_event_has_an_id(mcp_server):
    stream = SseConnection(mcp_server)
    assert stream.response.status == 200
    assert stream.response.getheader("content-type") == "text/event-stream"
    endpoint = stream.next()
    assert endpoint.event == "endpoint" and endpoint.id and endpoint.retry == 1000
    status, body, _ = post(mcp_server, endpoint.data, INITIALIZE)
    assert (status, body) == (202, b"")
    reply, event_id = stream.message()
    assert reply["id"] == 1 and event_id.startswith(session_of(endpoint.data) + ":")
    post(mcp_server, endpoint.data, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                     "params": {"name": "echo", "arguments": {"text": "hi"}}})
    reply, second_id = stream.message()
    assert reply["result"]["structuredContent"] == {"result": "hi"} and second_id != event_id
    stream.close()


def test_a_dropped_stream_resumes_on_another_process_with_nothing_lost(mcp_server, second_server, celery_worker):
    stream, messages = open_session(mcp_server)
    call = {"jsonrpc": "2.0", "id": "job", "method": "tools/call",
            "params": {"name": "slow_job", "arguments": {"steps": 6, "interval_ms": 50}, "_meta": {"progressToken": 7}}}
    assert post(mcp_server, messages, call)[0] == 202
    first, last_id = stream.message()
    second, last_id = stream.message()
    assert [first["params"]["progress"], second["params"]["progress"]] == [1, 2]
    stream.close()  # the network goes away; the worker goes on
    wait_until_answered(session_of(messages))  # so all that follows can only come from the replay

    resumed = SseConnection(second_server, {"Last-Event-ID": last_id})
    assert resumed.response.status == 200
    assert resumed.next().event == "endpoint"  # the same session's, again
    replayed = [resumed.message()[0] for _ in range(5)]
    assert [m["params"]["progress"] for m in replayed[:4]] == [3, 4, 5, 6]
    assert replayed[4]["id"] == "job" and replayed[4]["result"]["content"][0]["text"] == "done 6"
    # The session goes on, on the new connection: nothing is sent twice.
    post(second_server, messages, {"jsonrpc": "2.0", "id": "after", "method": "ping"})
    assert resumed.message()[0] == {"jsonrpc": "2.0", "id": "after", "result": {}}
    resumed.close()


@pytest.mark.parametrize("path", ["/sse", "/messages?session_id=x"])
@pytest.mark.parametrize("header, status", [("Origin", 403), ("Host", 400)])
def test_a_foreign_origin_or_host_is_refused_on_both_endpoints(mcp_server, path, header, status):
    """DNS-rebinding protection, as on /mcp: checked before anything else."""
    connection = http.client.HTTPConnection("127.0.0.1", mcp_server.port, timeout=30)
    method = "GET" if path == "/sse" else "POST"
    connection.request(method, path, body=b"{}", headers={header: "https://evil.example" if header == "Origin"
                                                          else "evil.example", "Accept": "text/event-stream"})
    response = connection.getresponse()
    assert response.status == status and json.loads(response.read())["error"]["code"] == -32600


def test_terminating_the_session_ends_its_stream(mcp_server, server_env):
    stream, messages = open_session(mcp_server)
    subprocess.run([sys.executable, "manage.py", "mcp_sessions", "terminate", session_of(messages)], cwd=ROOT,
                   env={**os.environ, **server_env}, check=True, capture_output=True, timeout=120)
    while stream.response.read1(65536):
        pass  # keep-alives, until the server ends the response
    assert post(mcp_server, messages, INITIALIZED)[0] == 404


def test_bad_requests_get_clear_errors(mcp_server):
    stream, messages = open_session(mcp_server)
    assert post(mcp_server, "/messages", INITIALIZE)[0] == 400  # no session_id
    status, body, _ = post(mcp_server, "/messages?session_id=" + "A" * 32, INITIALIZE)
    assert status == 404 and "Session not found" in json.loads(body)["error"]["message"]
    status, body, _ = post(mcp_server, messages, b"{not json")
    assert status == 400 and json.loads(body)["error"]["code"] == -32700
    assert post(mcp_server, messages, b"{}", {"Content-Type": "text/plain"})[0] == 415
    # A request the session cannot take gets its error on the stream, with its id.
    post(mcp_server, messages, INITIALIZE)
    reply, _ = stream.message()
    assert reply["id"] == 1 and reply["error"]["code"] == -32600
    stream.close()

    connection = http.client.HTTPConnection("127.0.0.1", mcp_server.port, timeout=30)
    connection.request("GET", "/sse", headers={"Accept": "application/json"})
    assert connection.getresponse().status == 406
    for last_event_id in ("nonsense", "A" * 32 + ":1:0.1-0", "A" * 32 + ":1:0.1-0~" + "0" * 32):
        refused = SseConnection(mcp_server, {"Last-Event-ID": last_event_id})
        assert refused.response.status == 400
    connection = http.client.HTTPConnection("127.0.0.1", mcp_server.port, timeout=30)
    connection.request("DELETE", "/messages")
    assert connection.getresponse().status == 405


def test_a_session_id_alone_does_not_resume_its_session(mcp_server):
    """With authorization off the session id is in every POST's URL, so in access logs: a resume
    needs an event id the server sent, not one built from the session id (it replayed the whole
    session and took its stream over)."""
    stream, messages = open_session(mcp_server)
    session_id = messages.split("session_id=")[1]
    for built in (f"{session_id}:1:0.0-0", f"{session_id}:1:0.0-0~" + "f" * 32):
        refused = SseConnection(mcp_server, {"Last-Event-ID": built})
        assert refused.response.status == 400, built
    ping = {"jsonrpc": "2.0", "id": 7, "method": "ping"}
    assert post(mcp_server, messages, ping)[0] == 202  # the owner's stream still gets its answers
    assert stream.message()[0] == {"jsonrpc": "2.0", "id": 7, "result": {}}
    stream.close()


def test_the_mcp_endpoint_is_untouched(client):
    """Streamable HTTP on /mcp still works beside the routes of HTTP+SSE."""
    client.initialize()
    assert client.call("tools/call", {"name": "echo", "arguments": {"text": "x"}})["result"]["structuredContent"] == \
        {"result": "x"}


# -- the TypeScript SDK 1.x SSEClientTransport -----------------------------------------------------

def node_binary():
    """The machine's node (the SDK runs on Node 20), else the one npm installed."""
    found = shutil.which("node") or str(ROOT / "node_modules" / ".bin" / "node")
    if not Path(found).exists():
        pytest.skip("node is not installed: the TypeScript SDK client cannot run here")
    sdk = ROOT / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"
    assert sdk.exists(), "node_modules lacks @modelcontextprotocol/sdk: run `npm ci` (make test does)"
    return found


class NodeClient:
    """tests/integration/node/sse_client.mjs as a child process: its events, and commands."""

    def __init__(self, server_port, tool, arguments, mode="stock"):
        script = Path(__file__).with_name("node") / "sse_client.mjs"
        self.process = subprocess.Popen([node_binary(), str(script), str(server_port), tool, json.dumps(arguments), mode],
                                        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
        self.events, self.seen = queue.Queue(), []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            self.events.put(json.loads(line))
        self.events.put({"event": "exit"})

    def expect(self, kind, timeout=60.0):
        deadline = time.monotonic() + timeout
        while True:
            event = self.events.get(timeout=max(0.01, deadline - time.monotonic()))
            self.seen.append(event)
            if event["event"] == kind:
                return event
            if event["event"] == "exit":
                raise AssertionError(f"node exited before {kind} ({self.process.wait()}) after {self.seen}: "
                                     f"{self.process.stderr.read()}")

    def send(self, command):
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def test_the_documented_fetch_is_the_one_the_tests_run():
    script = (Path(__file__).with_name("node") / "sse_client.mjs").read_text()
    snippet = script.split("// --- as in docs/http-sse.md ---\n")[1].split("// --- end ---")[0]
    assert snippet.strip() and snippet.strip() in (ROOT / "docs" / "http-sse.md").read_text()


@pytest.fixture
def node_client():
    clients = []

    def start(*args):
        clients.append(NodeClient(*args))
        return clients[-1]

    yield start
    for started in clients:
        started.stop()


def test_typescript_sdk_client_lists_and_runs_a_background_tool_with_progress(node_client, mcp_server,
                                                                             celery_worker):
    client = node_client(mcp_server.port, "slow_job", {"steps": 5, "interval_ms": 20})
    assert client.expect("connected")["serverVersion"]["name"]
    assert {"echo", "slow_job"} <= set(client.expect("tools")["names"])
    result = client.expect("result", timeout=120)
    # Every message once, in order: the tools/list reply (id 1), progress 1 to 5, the reply (id 2).
    # What reached the transport, not onprogress: the SDK runs notification handlers a tick after
    # responses, so a report that shares a chunk with the reply (a busy machine) misses onprogress.
    assert result["delivered"] == [1, 1, 2, 3, 4, 5, 2], result
    assert result["progress"] == [1, 2, 3, 4, 5][:len(result["progress"])]
    assert result["result"]["content"][0]["text"] == "done 5"
    assert client.process.wait(30) == 0


def test_typescript_sdk_client_resumes_after_a_drop_on_another_process(node_client, mcp_server, second_server,
                                                                       celery_worker):
    client = node_client(mcp_server.port, "slow_job", {"steps": 8, "interval_ms": 50}, "resuming")
    session_id = client.expect("connected")["sessionId"]
    assert {"echo", "slow_job"} <= set(client.expect("tools")["names"])
    assert client.expect("progress")["progress"] == 1
    assert client.expect("progress")["progress"] == 2
    client.send("drop")
    client.expect("dropped")
    wait_until_answered(session_id)  # everything after the drop waits in the store
    client.send(f"restore {second_server.port}")  # EventSource reconnects with Last-Event-ID
    result = client.expect("result", timeout=120)
    # Every message once, in order: the tools/list reply (id 1), progress 1 to 8, the reply (id 2).
    assert result["delivered"] == [1, 1, 2, 3, 4, 5, 6, 7, 8, 2], result
    assert result["result"]["content"][0]["text"] == "done 8"
    assert client.process.wait(30) == 0


# -- with AUTH on: the same tokens as /mcp, sessions bound to their principal ---------------------

@pytest.fixture(scope="module")
def auth_server(start_server):
    return start_server(MCP_AUTH="on")


def new_token(server_env, user) -> str:
    done = subprocess.run([sys.executable, "manage.py", "mcp_tokens", "create", "--user", user], cwd=ROOT,
                          env={**os.environ, **server_env}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_with_auth_on_every_request_needs_the_token_of_the_session_owner(auth_server, server_env):
    alice, bob = new_token(server_env, "alice"), new_token(server_env, "bob")
    refused = SseConnection(auth_server)
    assert refused.response.status == 401 and refused.response.getheader("www-authenticate").startswith("Bearer ")
    stream = SseConnection(auth_server, {"Authorization": f"Bearer {alice}"})
    assert stream.response.status == 200
    messages = stream.next().data
    assert post(auth_server, messages, INITIALIZE)[0] == 401
    assert post(auth_server, messages, INITIALIZE, {"Authorization": f"Bearer {bob}"})[0] == 404
    assert post(auth_server, messages, INITIALIZE, {"Authorization": f"Bearer {alice}"})[0] == 202
    assert stream.message()[0]["result"]["protocolVersion"] == "2024-11-05"
    resumed = SseConnection(auth_server, {"Authorization": f"Bearer {bob}", "Last-Event-ID": stream.decoder.last_event_id})
    assert resumed.response.status == 404  # another principal's session does not exist for bob
    stream.close()


@pytest.mark.asyncio
async def test_a_tools_request_to_the_client_gets_its_answer(mcp_server):
    """Sampling: the request goes out on the SSE stream, the answer comes in as a POST."""
    from mcp import types

    async def sample(context, params):
        return types.CreateMessageResult(role="assistant", model="test-model",
                                         content=types.TextContent(type="text", text="sampled over SSE"))

    async with Client(sse_client(sse_url(mcp_server)), mode="legacy", sampling_callback=sample) as client:
        result = await client.call_tool("test_sampling", {"prompt": "Say something"})
    assert result.is_error is not True and "sampled over SSE" in result.content[0].text


def test_with_auth_on_the_pair_is_one_protected_resource_with_its_metadata(auth_server, server_env):
    """The /sse challenge names metadata that is served; a toolkit token issued for /sse (RFC 8707)
    opens the stream and is accepted on its /messages too; one for /mcp is another resource's."""
    from .test_auth import challenge_params, toolkit_token

    origin = f"http://127.0.0.1:{auth_server.port}"
    refused = SseConnection(auth_server)
    assert refused.response.status == 401
    metadata_url = challenge_params(refused.response.getheader("www-authenticate"))["resource_metadata"]
    assert metadata_url == f"{origin}/.well-known/oauth-protected-resource/sse"
    metadata = _get_json(auth_server, metadata_url)
    assert metadata["resource"] == f"{origin}/sse" and metadata["authorization_servers"] == [origin]

    token = toolkit_token(server_env, f"dot-sse-{os.urandom(6).hex()}", user="sally", resource=[f"{origin}/sse"])
    bearer = {"Authorization": f"Bearer {token}"}
    stream = SseConnection(auth_server, bearer)
    assert stream.response.status == 200
    messages = stream.next().data
    status, body, headers = post(auth_server, messages, INITIALIZE)
    assert status == 401  # /messages challenges for /sse's metadata as well
    assert challenge_params(headers["WWW-Authenticate"])["resource_metadata"] == metadata_url
    assert post(auth_server, messages, INITIALIZE, bearer)[0] == 202
    assert stream.message()[0]["result"]["protocolVersion"] == "2024-11-05"
    stream.close()

    for_mcp = toolkit_token(server_env, f"dot-mcp-{os.urandom(6).hex()}", user="sally", resource=[auth_server.url])
    other = SseConnection(auth_server, {"Authorization": f"Bearer {for_mcp}"})
    assert other.response.status == 401  # RFC 8707: issued for /mcp, not for this resource


def _get_json(server, url):
    path = url.split(f":{server.port}", 1)[1]
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    connection.request("GET", path)
    response = connection.getresponse()
    assert response.status == 200, (response.status, response.read())
    data = json.loads(response.read())
    connection.close()
    return data
