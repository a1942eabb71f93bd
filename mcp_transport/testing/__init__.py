"""Test helpers shipped with the app (as channels.testing and rest_framework.test are).

``LiveServer`` runs a real daphne process on a free port, ``LiveWorker`` a real Celery worker;
``HttpClient`` speaks raw HTTP to the server
(stdlib only), including reading SSE streams event by event, so tests see exact status codes,
headers and frames.

    server = LiveServer(env={"REDIS_URL": ...}).start()
    client = HttpClient(server.url)
    client.initialize()
    reply = client.call("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
"""
import http.client
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ..protocol.sse import SseDecoder

LATEST = "2025-11-25"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class _ChildProcess:
    """A child process in its own process group, logging to a temporary file."""

    #: Seconds a SIGTERM gets before the group is killed.
    stop_timeout = 10

    def __init__(self, env=None, cwd=None):
        self.env = {**os.environ, **(env or {})}
        self.cwd = cwd
        self.process = None
        self.log_file = None

    def _spawn(self, argv, log_prefix):
        self.log_file = tempfile.NamedTemporaryFile(prefix=log_prefix, suffix=".log", delete=False)
        self.process = subprocess.Popen(argv, env=self.env, cwd=self.cwd, stdout=self.log_file,
                                        stderr=subprocess.STDOUT, start_new_session=True)

    def log(self) -> str:
        return Path(self.log_file.name).read_text(errors="replace") if self.log_file else ""

    def kill(self) -> None:
        """SIGKILL the whole group: it gets no chance to clean up (a crash)."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)  # a warm shutdown for Celery
            try:
                self.process.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.log_file:
            self.log_file.close()


class LiveServer(_ChildProcess):
    """``daphne -b 127.0.0.1 -p PORT <application>`` as a child process."""

    def __init__(self, application="mcpserver.asgi:application", env=None, cwd=None, path="/mcp"):
        super().__init__(env, cwd)
        self.application, self.path = application, path
        self.port = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.path}"

    def start(self, timeout=30.0) -> "LiveServer":
        self.port = free_port()
        daphne = Path(sys.executable).with_name("daphne")
        self._spawn([str(daphne), "-v", "1", "-b", "127.0.0.1", "-p", str(self.port), self.application], "daphne-")
        self._wait_until_listening(timeout)
        return self

    def _wait_until_listening(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"daphne exited with {self.process.returncode}:\n{self.log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"daphne did not listen within {timeout}s:\n{self.log()}")


class LiveWorker(_ChildProcess):
    """``celery -A <app> worker`` as a child process, consuming one queue: a test run's own
    queue, so that no other worker on the same broker can take its jobs.

    Its log must show INFO lines (``LOG_LEVEL=INFO`` in the example project): ``start()``
    waits for Celery's "ready." line."""

    stop_timeout = 15

    def __init__(self, app="mcpserver", queue="celery", env=None, cwd=None, concurrency=1):
        super().__init__(env, cwd)
        self.app, self.queue, self.concurrency = app, queue, concurrency

    def start(self, timeout=60.0) -> "LiveWorker":
        self._spawn([sys.executable, "-m", "celery", "-A", self.app, "worker", "-Q", self.queue,
                     "-c", str(self.concurrency), "-P", "prefork", "-n", f"{self.queue}-{free_port()}@%h",
                     "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "INFO"], "celery-")
        deadline = time.monotonic() + timeout
        while " ready." not in self.log():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"the Celery worker did not start:\n{self.log()}")
            time.sleep(0.1)
        return self

    def pool_pids(self) -> list:
        """The pool processes (children of the main process) that run the tasks."""
        path = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        return [int(pid) for pid in path.read_text().split()]

    def kill_pool(self) -> None:
        """SIGKILL the pool processes: the main process sees them die (WorkerLostError)."""
        for pid in self.pool_pids():
            os.kill(pid, signal.SIGKILL)


@dataclass
class Reply:
    status: int
    headers: dict
    body: bytes

    @property
    def json(self):
        return json.loads(self.body)

    @property
    def content_type(self):
        return self.headers.get("content-type", "").split(";")[0]


#: How long a read waits between two events by default: past KEEPALIVE_SECONDS (15 s by default),
#: within which a live stream always sends something, even a job's that waits for a busy worker.
EVENT_GAP = 30.0


class SseStream:
    """An open SSE response, read event by event (each read waits ``timeout`` seconds at most for
    the next event, EVENT_GAP by default)."""

    def __init__(self, connection, response):
        self.connection, self.response = connection, response
        self.status = response.status
        self.headers = {k.lower(): v for k, v in response.getheaders()}
        self.decoder = SseDecoder()
        self._pending = []
        self.raw = b""
        self.closed_by_server = False

    def next_event(self, timeout=EVENT_GAP):
        """The next event, or None when the server ended the stream."""
        self.connection.sock.settimeout(timeout)
        while not self._pending:
            chunk = self.response.read1(65536)
            if not chunk:
                self.closed_by_server = True
                return None
            self.raw += chunk
            self._pending.extend(self.decoder.feed(chunk))
        return self._pending.pop(0)

    def events(self, timeout=EVENT_GAP):
        """All events until the server ends the stream."""
        collected = []
        while (event := self.next_event(timeout)) is not None:
            collected.append(event)
        return collected

    def next_message(self, timeout=EVENT_GAP) -> dict:
        """The next JSON-RPC message (events without data, such as priming events, are skipped)."""
        while True:
            event = self.next_event(timeout)
            assert event is not None, "the server ended the stream"
            if event.data:
                return json.loads(event.data)

    @property
    def last_event_id(self) -> str:
        """The id of the last event read: what a client resumes from (``HttpClient.resume``)."""
        return self.decoder.last_event_id

    def messages(self, timeout=EVENT_GAP):
        return [json.loads(e.data) for e in self.events(timeout) if e.data]

    def close(self):
        """Drop the TCP connection, as a client whose network went away."""
        try:
            self.connection.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.connection.close()


def assert_transport_error(reply: Reply, status: int, code: int = -32600) -> None:
    """An HTTP-level rejection: the status, and a JSON-RPC error body without an id."""
    assert reply.status == status, (reply.status, reply.body)
    assert reply.content_type == "application/json"
    body = reply.json
    assert body["jsonrpc"] == "2.0"
    assert "id" not in body, body
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]


class HttpClient:
    """A minimal MCP client over raw HTTP: one connection per request, like a fresh client."""

    def __init__(self, url, protocol_version=LATEST, token=None):
        parts = urlsplit(url)
        self.host, self.port, self.path = parts.hostname, parts.port, parts.path
        self.protocol_version = protocol_version
        #: Sent as ``Authorization: Bearer <token>`` on every request when set.
        self.token = token
        self.session_id = None
        self._ids = itertools.count(1)

    def on(self, url) -> "HttpClient":
        """A client of the same session that talks to another server (a second instance)."""
        other = HttpClient(url, self.protocol_version, self.token)
        other.session_id = self.session_id
        return other

    def with_token(self, token) -> "HttpClient":
        """A client of the same session presenting another token (or none)."""
        other = HttpClient(f"http://{self.host}:{self.port}{self.path}", self.protocol_version, token)
        other.session_id = self.session_id
        return other

    def headers(self, extra=None, session=True):
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if session and self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
            headers["MCP-Protocol-Version"] = self.protocol_version
        headers.update(extra or {})
        return {k: v for k, v in headers.items() if v is not None}

    def _send(self, method, body, headers, timeout):
        connection = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        connection.request(method, self.path, body=body, headers=headers)
        return connection, connection.getresponse()

    def request(self, method, body=None, headers=None, session=True, timeout=30.0) -> Reply:
        connection, response = self._send(method, body, self.headers(headers, session), timeout)
        try:
            return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
        finally:
            connection.close()

    def stream(self, method, body=None, headers=None, session=True, timeout=30.0) -> SseStream:
        connection, response = self._send(method, body, self.headers(headers, session), timeout)
        return SseStream(connection, response)

    def message(self, method, params=None, request_id=None):
        message = {"jsonrpc": "2.0", "method": method}
        if request_id is not False:
            message["id"] = next(self._ids) if request_id is None else request_id
        if params is not None:
            message["params"] = params
        return message

    def initialize(self, version=None, capabilities=None, initialized=True) -> Reply:
        params = {"protocolVersion": version or self.protocol_version, "capabilities": capabilities or {},
                  "clientInfo": {"name": "mcp-transport-tests", "version": "0"}}
        reply = self.request("POST", self.message("initialize", params), session=False)
        assert reply.status == 200, (reply.status, reply.body)
        self.session_id = reply.headers["mcp-session-id"]
        self.protocol_version = reply.json["result"]["protocolVersion"]
        if initialized:
            notified = self.request("POST", self.message("notifications/initialized", request_id=False))
            assert notified.status == 202, (notified.status, notified.body)
        return reply

    def call(self, method, params=None, headers=None, timeout=30.0) -> dict:
        """A request answered with JSON or SSE; returns the JSON-RPC response message. A stream
        may stay silent up to ``timeout`` seconds between events (a background job waiting for a
        busy worker sends nothing until KEEPALIVE_SECONDS)."""
        message = self.message(method, params)
        stream = self.stream("POST", message, headers, timeout=timeout)
        if stream.headers.get("content-type", "").startswith("text/event-stream"):
            responses = [m for m in stream.messages(timeout) if m.get("id") == message["id"] and "method" not in m]
            assert len(responses) == 1, responses
            return responses[0]
        body = stream.response.read()
        stream.connection.close()
        assert stream.status == 200, (stream.status, body)
        return json.loads(body)

    def call_tool_stream(self, name, arguments=None, progress_token="progress") -> SseStream:
        """``tools/call`` with a progress token, answered as an SSE stream to read event by
        event (``next_message()``) or drop (``close()``)."""
        params = {"name": name, "arguments": arguments or {}, "_meta": {"progressToken": progress_token}}
        return self.stream("POST", self.message("tools/call", params))

    def resume(self, last_event_id, timeout=30.0) -> SseStream:
        """``GET`` with ``Last-Event-ID``: the rest of a dropped stream, from any server."""
        return self.stream("GET", headers={"Accept": "text/event-stream", "Last-Event-ID": last_event_id},
                           timeout=timeout)

    def delete(self) -> Reply:
        return self.request("DELETE")


class ModernClient(HttpClient):
    """A raw HTTP client of the modern era (2026-07-28, stateless): every request carries ``params._meta``
    and the standard headers (MCP-Protocol-Version, Mcp-Method, Mcp-Name); no session."""

    VERSION = "2026-07-28"
    NAME_KEYS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
                 "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId",
                 "tasks/stream": "taskId"}

    def __init__(self, url, capabilities=None, log_level=None):
        super().__init__(url, self.VERSION)
        self.capabilities = capabilities if capabilities is not None else {}
        self.log_level = log_level

    def meta(self, **extra):
        meta = {"io.modelcontextprotocol/protocolVersion": self.VERSION,
                "io.modelcontextprotocol/clientCapabilities": self.capabilities,
                "io.modelcontextprotocol/clientInfo": {"name": "mcp-transport-tests", "version": "0"}}
        if self.log_level is not None:
            meta["io.modelcontextprotocol/logLevel"] = self.log_level
        meta.update(extra)
        return meta

    def modern_message(self, method, params=None, request_id=None):
        params = dict(params or {})
        params["_meta"] = {**self.meta(), **params.get("_meta", {})}
        return self.message(method, params, request_id)

    def modern_headers(self, message, extra=None):
        headers = {"MCP-Protocol-Version": self.VERSION, "Mcp-Method": message["method"]}
        key = self.NAME_KEYS.get(message["method"])
        if key and key in message.get("params", {}):
            headers["Mcp-Name"] = message["params"][key]
        headers.update(extra or {})
        return headers

    def post(self, method, params=None, headers=None, request_id=None, timeout=30.0) -> Reply:
        message = self.modern_message(method, params, request_id)
        return self.request("POST", message, self.modern_headers(message, headers), session=False, timeout=timeout)

    def open(self, method, params=None, headers=None, request_id=None, timeout=30.0) -> SseStream:
        message = self.modern_message(method, params, request_id)
        return self.stream("POST", message, self.modern_headers(message, headers), session=False, timeout=timeout)
