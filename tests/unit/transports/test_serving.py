import inspect

from twisted.web import http as twisted_http

from mcp_transport.transports.serving import tune_daphne


def test_tune_daphne_memoises_content_type_parsing_without_changing_it():
    original = inspect.unwrap(twisted_http._parseContentType)
    headers = [b"application/json", b"Application/JSON; charset=utf-8", b"multipart/form-data; boundary=x", b""]
    expected = [original(h) for h in headers]
    assert tune_daphne() is True
    assert hasattr(twisted_http._parseContentType, "cache_info")
    assert [twisted_http._parseContentType(h) for h in headers] == expected
    assert tune_daphne() is True  # idempotent: not wrapped twice
    assert inspect.unwrap(twisted_http._parseContentType) is original


def test_a_content_type_email_refuses_reaches_the_app():
    """Twisted would drop the connection unanswered on ValueError (found by tests/fuzz)."""
    tune_daphne()
    assert twisted_http._parseContentType(b"a\x0bb") == b""


class _FakeSocket:
    """A socket that takes at most ``room`` bytes per send."""

    def __init__(self, room):
        self.room, self.sent = room, b""

    def send(self, data):
        taken = bytes(data[: self.room])
        self.sent += taken
        return len(taken)


def _connection(room):
    from twisted.internet import tcp

    connection = tcp.Connection.__new__(tcp.Connection)
    connection.socket, connection.connected, connection.disconnecting = _FakeSocket(room), 1, 0
    connection._writeDisconnected, connection.dataBuffer, connection.offset = False, b"", 0
    connection._tempDataBuffer, connection._tempDataLen = [], 0
    connection.producer, connection.streamingProducer, connection.producerPaused = None, False, False
    connection.started_writing = 0
    connection.startWriting = lambda: setattr(connection, "started_writing", connection.started_writing + 1)
    return connection


def test_tuned_tcp_writes_send_at_once_and_queue_only_what_the_socket_does_not_take():
    assert tune_daphne() is True
    idle = _connection(room=1000)
    idle.write(b"id: 1\n\n")
    idle.writeSequence([b"HTTP/1.1 200 OK\r\n", b"\r\n"])
    assert idle.socket.sent == b"id: 1\n\nHTTP/1.1 200 OK\r\n\r\n"
    assert idle._tempDataBuffer == [] and idle.started_writing == 0  # no writability registration

    full = _connection(room=3)
    full.write(b"abcdef")
    assert full.socket.sent == b"abc" and full._tempDataBuffer == [b"def"] and full.started_writing == 1
    full.write(b"gh")  # something is queued: behind it, never ahead
    assert full.socket.sent == b"abc" and full._tempDataBuffer == [b"def", b"gh"]


def test_tune_gc_collects_less_often_and_leaves_what_start_up_loaded_alone():
    import gc

    from mcp_transport.transports.serving import GC_THRESHOLDS, tune_gc

    before = gc.get_threshold()
    try:
        tune_gc()
        assert gc.get_threshold() == GC_THRESHOLDS and GC_THRESHOLDS[0] > before[0]
        assert gc.get_freeze_count() > 10_000  # Django, Twisted and the app: out of every collection
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
