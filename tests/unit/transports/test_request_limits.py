"""What the limited HTTP channel (request_limits.py) costs per request, counted on a fake TCP
connection and a fake clock: no timer per request, one send per JSON reply, no access-log line
for a log that goes nowhere."""
import pytest
from twisted.internet import task
from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport
from twisted.web import http as twisted_http

from mcp_transport.transports.request_limits import LimitedChannel, install
from mcp_transport.transports.serving import tune_daphne

REQUEST = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}"
BODY = b'{"jsonrpc": "2.0", "id": 1, "result": {}}'


class _CountingSocket:
    def __init__(self):
        self.sends = []

    def send(self, data):
        self.sends.append(bytes(data))
        return len(data)

    def setsockopt(self, *args):
        pass


def _connection():
    from twisted.internet import tcp

    connection = tcp.Connection.__new__(tcp.Connection)
    connection.socket, connection.connected, connection.disconnecting = _CountingSocket(), 1, 0
    connection._writeDisconnected, connection.dataBuffer, connection.offset = False, b"", 0
    connection._tempDataBuffer, connection._tempDataLen = [], 0
    connection.producer, connection.streamingProducer, connection.producerPaused = None, False, False
    connection.startWriting = connection.startReading = connection.stopReading = lambda: None
    address = IPv4Address("TCP", "127.0.0.1", 5000)
    connection.getPeer = connection.getHost = lambda: address
    return connection


class _CountingClock(task.Clock):
    def __init__(self):
        super().__init__()
        self.scheduled = 0

    def callLater(self, *args, **kwargs):
        self.scheduled += 1
        return super().callLater(*args, **kwargs)


@pytest.fixture
def channel():
    assert tune_daphne() is True
    channel = LimitedChannel()
    channel.clock = clock = _CountingClock()
    channel.callLater = clock.callLater
    channel.makeConnection(_connection())
    return channel


def _answer(channel):
    """One request on ``channel`` and its JSON reply (what daphne writes for send_json)."""
    channel.dataReceived(REQUEST)
    request = channel.requests[-1]
    request.setHeader(b"content-type", b"application/json")
    request.setHeader(b"content-length", str(len(BODY)).encode())
    request.write(BODY)
    request.finish()


def test_a_json_reply_leaves_in_one_send(channel):
    sends = channel.transport.socket.sends
    _answer(channel)
    assert len(sends) == 1, sends  # status line, headers and body together
    assert sends[0].startswith(b"HTTP/1.1 200 OK\r\n") and sends[0].endswith(b"\r\n\r\n" + BODY)
    _answer(channel)  # and the next one on the same connection
    assert len(sends) == 2 and sends[1].endswith(BODY)


def test_a_streamed_reply_sends_its_headers_at_once(channel):
    """An SSE response's headers must not wait for its first event."""
    sends = channel.transport.socket.sends
    channel.dataReceived(REQUEST)
    request = channel.requests[-1]
    request.setHeader(b"content-type", b"text/event-stream")
    request.write(b"")
    assert len(sends) == 1 and sends[0].startswith(b"HTTP/1.1 200 OK\r\n")
    request.write(b"data: 1\n\n")
    assert len(sends) == 2


def test_requests_on_a_keep_alive_connection_set_no_timer(channel):
    clock = channel.clock
    _answer(channel)
    scheduled = clock.scheduled
    for _ in range(20):
        _answer(channel)
    assert clock.scheduled == scheduled, "a timer per request"
    assert len(clock.getDelayedCalls()) <= 2  # the idle timer and the receive deadline's


def test_the_idle_timer_ends_a_quiet_connection_and_spares_a_busy_one(channel, monkeypatch):
    import mcp_transport.transports.request_limits as limits

    now = [1000.0]
    monkeypatch.setattr(limits.time, "monotonic", lambda: now[0])
    channel._active_at = now[0]
    closed = []
    monkeypatch.setattr(channel, "timeoutConnection", lambda: closed.append(now[0]))
    channel.dataReceived(REQUEST)  # a response is being served: never idle meanwhile
    for _ in range(3):
        now[0] += channel.idle_seconds
        channel.clock.advance(channel.idle_seconds)
    assert closed == []
    channel.requests[-1].finish()  # the response ends: idle from here
    now[0] += channel.idle_seconds / 2
    channel.clock.advance(channel.idle_seconds)  # the timer fires early and waits for the rest
    assert closed == []
    now[0] += channel.idle_seconds / 2
    channel.clock.advance(channel.idle_seconds / 2)
    assert closed == [now[0]]


class _Server:
    def __init__(self, verbosity):
        self.verbosity = verbosity


@pytest.mark.parametrize("verbosity, logged", [(0, 0), (1, 0), (2, 1)])
def test_twisted_access_lines_are_made_only_where_daphne_shows_them(verbosity, logged):
    from daphne.http_protocol import HTTPFactory

    install(HTTPFactory)
    factory = HTTPFactory(_Server(verbosity))
    lines = []
    factory._logFile = type("Log", (), {"write": lambda self, line: lines.append(line)})()
    http_channel = twisted_http.HTTPChannel()
    http_channel.makeConnection(StringTransport())
    factory.log(twisted_http.Request(http_channel))
    assert len(lines) == logged


def test_the_connection_s_own_address_is_asked_once(channel):
    asked = []
    address = channel.transport.getHost()
    channel.transport.getHost = lambda: asked.append(1) or address
    for _ in range(5):
        _answer(channel)
    assert len(asked) == 1
    assert channel.requests == [] and channel.isSecure() is False
