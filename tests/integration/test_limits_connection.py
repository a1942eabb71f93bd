"""Limits daphne enforces while a request arrives (request_limits.py), over raw TCP sockets.

Each test sends only part of what an unlimited server would wait for, and must get its refusal
anyway: without the limit it would wait for the rest and the read would hit its deadline.
"""
import json
import select
import socket
import time
import urllib.request

import pytest

from mcp_transport.testing import HttpClient

#: Generous: a refusal is due at once; only a missing limit makes these reads wait this long.
DEADLINE = 30
METRICS_TOKEN = "limits-test-token"
SMALL = {"MAX_REQUEST_BYTES": 64 * 1024, "MAX_HEADERS": 20, "MAX_HEADER_BYTES": 4096,
         "REQUEST_RECEIVE_SECONDS": 2, "IDLE_CONNECTION_SECONDS": 2}


@pytest.fixture(scope="module")
def small_server(start_server):
    server = start_server(MCP_TRANSPORT_JSON=json.dumps(SMALL), MCP_METRICS_TOKEN=METRICS_TOKEN)
    yield server
    server.stop()


def connect(server):
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=DEADLINE)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def head(lines, path="/mcp", method="POST"):
    return (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n" + "".join(f"{line}\r\n" for line in lines)
            + "\r\n").encode()


def read_response(sock):
    """(status, body, closed) of the one response on ``sock``; ``closed``: the server ended the
    connection after it."""
    data, deadline = b"", time.monotonic() + DEADLINE
    while b"\r\n\r\n" not in data or len(data) < _expected_length(data):
        sock.settimeout(max(0.1, deadline - time.monotonic()))
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    header, _, body = data.partition(b"\r\n\r\n")
    assert header, "no response at all"
    status = int(header.split(b" ", 2)[1])
    sock.settimeout(DEADLINE)
    try:
        closed = sock.recv(1) == b""
    except ConnectionResetError:
        closed = True
    except TimeoutError:
        closed = False
    return status, header.decode("latin-1"), body, closed


def _expected_length(data):
    header, _, _ = data.partition(b"\r\n\r\n")
    for line in header.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(header) + 4 + int(value)
    return len(data) + 1


def assert_refused(status, header, body, closed, expected):
    assert status == expected, (status, header, body)
    assert "application/json" in header.lower()
    error = json.loads(body)["error"]
    assert error["code"] == -32600 and error["message"]
    assert closed


def init_body(pad=0):
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                       "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                  "clientInfo": {"name": "limits", "version": "0", "pad": "x" * pad}}}).encode()


JSON_HEADERS = ["Content-Type: application/json", "Accept: application/json, text/event-stream"]


# -- body size -------------------------------------------------------------------------------

def test_a_declared_1_gib_body_gets_413_before_it_is_sent(mcp_server):
    """Default limits: headers and 64 KiB of a 1 GiB body, then the 413 must be there already."""
    with connect(mcp_server) as sock:
        sock.sendall(head([*JSON_HEADERS, f"Content-Length: {1 << 30}"]) + b"{" * 65536)
        status, header, body, closed = read_response(sock)
    assert_refused(status, header, body, closed, 413)
    assert str(4 * 1024 * 1024) in json.loads(body)["error"]["message"]


def test_a_declared_large_body_is_refused_without_100_continue(small_server):
    with connect(small_server) as sock:
        sock.sendall(head([*JSON_HEADERS, "Expect: 100-continue", f"Content-Length: {64 * 1024 + 1}"]))
        status, header, body, closed = read_response(sock)
    assert_refused(status, header, body, closed, 413)


def test_a_chunked_body_is_refused_once_it_crosses_the_limit(small_server):
    """Chunks keep coming (the last one is never sent): the 413 must come while they do."""
    sent, chunk = 0, b"4000\r\n" + b"x" * 0x4000 + b"\r\n"
    with connect(small_server) as sock:
        sock.sendall(head([*JSON_HEADERS, "Transfer-Encoding: chunked"]))
        sock.setblocking(False)
        while sent < 256 * 1024 * 1024:
            readable, writable, _ = select.select([sock], [sock], [], DEADLINE)
            if readable:
                break
            assert writable, "the server neither answered nor read"
            try:
                sent += sock.send(chunk)
            except BlockingIOError:
                continue
        sock.setblocking(True)
        status, header, body, closed = read_response(sock)
    assert_refused(status, header, body, closed, 413)
    assert sent < 256 * 1024 * 1024


def test_bodies_under_the_limit_still_work_chunked_and_with_100_continue(small_server):
    body = init_body(pad=40_000)
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:1000], body[1000:])) + b"0\r\n\r\n"
    for headers, payload in ((["Transfer-Encoding: chunked"], chunked),
                             ([f"Content-Length: {len(body)}", "Expect: 100-continue"], body)):
        with connect(small_server) as sock:
            sock.sendall(head([*JSON_HEADERS, *headers]) + payload)
            status, header, reply, _ = read_response(sock)
        if status == 100:  # the interim response, then ours
            header, _, reply = reply.partition(b"\r\n\r\n")
            status = int(header.split(b" ", 2)[1])
        assert status == 200, (status, header, reply)


def test_the_body_limit_is_only_the_mcp_endpoints(small_server):
    """Other paths are Django's (and the front proxy's): a large body there is read."""
    with connect(small_server) as sock:
        sock.sendall(head([f"Content-Length: {100 * 1024}"], path="/not-mcp") + b"x" * (100 * 1024))
        status, header, body, _ = read_response(sock)
    assert status == 404, (status, header)


# -- headers ---------------------------------------------------------------------------------

def test_too_many_headers_is_431(small_server):
    with connect(small_server) as sock:
        sock.sendall(head([*JSON_HEADERS, *(f"X-Extra-{n}: {n}" for n in range(20))]))
        assert_refused(*read_response(sock), 431)


@pytest.mark.parametrize("lines", [
    [f"X-Big: {'y' * 5000}"],                               # one line over MAX_HEADER_BYTES
    [f"X-Part-{n}: {'y' * 900}" for n in range(6)],         # several lines that add up to it
])
def test_headers_over_max_header_bytes_are_431(small_server, lines):
    with connect(small_server) as sock:
        sock.sendall(head([*JSON_HEADERS, *lines]))
        assert_refused(*read_response(sock), 431)


def test_headers_under_the_limits_still_work(small_server):
    reply = HttpClient(small_server.url).request(
        "POST", init_body(), {f"X-Extra-{n}": "z" * 100 for n in range(10)}, session=False)
    assert reply.status == 200, reply.body


# -- slow and idle connections ---------------------------------------------------------------

def trickle(sock):
    """Send a request a byte at a time, faster than the idle timeout, until the server answers."""
    request = head([*JSON_HEADERS, "Content-Length: 100"])
    started = time.monotonic()
    for byte in request:
        readable, _, _ = select.select([sock], [], [], 0.25)
        if readable:
            return
        sock.send(bytes([byte]))
    while not select.select([sock], [], [], 0.25)[0]:
        assert time.monotonic() - started < DEADLINE, "no 408 while trickling"
        sock.send(b"{")


def test_a_trickling_request_gets_408(small_server):
    """A byte at a time, faster than the idle timeout: only the receive deadline ends it."""
    with connect(small_server) as sock:
        trickle(sock)
        assert_refused(*read_response(sock), 408)


def test_a_later_request_of_a_keep_alive_connection_that_trickles_gets_408(small_server):
    """The connection's one timer, set at its first request, looks at the request being received
    when it fires: a later one gets its whole time, and then its 408."""
    body = init_body()
    with connect(small_server) as sock:
        sock.sendall(head([*JSON_HEADERS, f"Content-Length: {len(body)}"]) + body)
        data = b""
        while b"\r\n\r\n" not in data or len(data) < _expected_length(data):
            data += sock.recv(65536)
        assert data.startswith(b"HTTP/1.1 200"), data[:200]
        time.sleep(1)  # half the receive deadline: the first request's timer fires during the second
        started = time.monotonic()
        trickle(sock)
        assert time.monotonic() - started >= SMALL["REQUEST_RECEIVE_SECONDS"] * 0.9, "refused before its time"
        assert_refused(*read_response(sock), 408)


def test_an_idle_connection_is_closed(small_server):
    with connect(small_server) as sock:
        sock.settimeout(DEADLINE)
        assert sock.recv(1) == b""


def test_a_connection_idle_after_its_response_is_closed(small_server):
    """The idle timer, set when the connection opened, counts from the end of the response."""
    body = init_body()
    with connect(small_server) as sock:
        sock.sendall(head([*JSON_HEADERS, f"Content-Length: {len(body)}"]) + body)
        answered = time.monotonic()
        status, _header, _body, closed = read_response(sock)
        assert status == 200 and closed
        assert time.monotonic() - answered >= SMALL["IDLE_CONNECTION_SECONDS"] * 0.9, "closed before its time"


def test_a_response_that_outlasts_the_idle_timeout_is_not_cut(small_server):
    """A call that takes longer than IDLE_CONNECTION_SECONDS gets its whole answer."""
    steps = int(SMALL["IDLE_CONNECTION_SECONDS"] * 10 * 1.5)  # 100 ms each
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "slow_progress", "arguments": {"steps": steps, "interval_ms": 100},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {},
                  "io.modelcontextprotocol/clientInfo": {"name": "limits", "version": "0"}}}}).encode()
    modern = ["MCP-Protocol-Version: 2026-07-28", "Mcp-Method: tools/call", "Mcp-Name: slow_progress"]
    with connect(small_server) as sock:
        sock.sendall(head([*JSON_HEADERS, *modern, f"Content-Length: {len(body)}"]) + body)
        status, header, reply, _closed = read_response(sock)
    assert status == 200, (header, reply)
    assert json.loads(reply)["result"]["content"][0]["text"], reply


def test_a_keep_alive_connection_serves_several_requests(small_server):
    """The deadline is per request: it is not armed while a response is served, nor carried over."""
    body = init_body()
    with connect(small_server) as sock:
        for _ in range(3):
            sock.sendall(head([*JSON_HEADERS, f"Content-Length: {len(body)}"]) + body)
            data = b""
            while b"\r\n\r\n" not in data or len(data) < _expected_length(data):
                data += sock.recv(65536)
            assert data.startswith(b"HTTP/1.1 200"), data[:200]


# -- counted -------------------------------------------------------------------------------

def test_refusals_are_counted_in_the_metrics(small_server):
    with connect(small_server) as sock:
        sock.sendall(head([*JSON_HEADERS, f"Content-Length: {1 << 20}"]))
        assert read_response(sock)[0] == 413
    metrics_url = small_server.url.replace("/mcp", "/metrics")
    deadline = time.monotonic() + DEADLINE
    while True:
        request = urllib.request.Request(metrics_url, headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
        text = urllib.request.urlopen(request, timeout=DEADLINE).read().decode()
        metric = 'mcp_limit_refusals_total{limit="body_bytes"}'
        counted = [line for line in text.splitlines() if line.startswith(metric)]
        if counted and float(counted[0].split()[-1]) >= 1:
            return
        assert time.monotonic() < deadline, counted
        time.sleep(0.2)
