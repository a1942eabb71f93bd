"""Plain TCP writes under daphne: sent at once when nothing is queued (``send_at_once``, applied
by ``serving.tune_daphne``), and a response's first writes joined into one send
(``writes_joined``, used by request_limits.py)."""
import contextlib


def send_at_once(connection_class) -> None:
    """Make plain TCP writes send at once when the connection has nothing queued.

    Twisted queues every write and registers the socket for writability; the next loop turn
    sends and unregisters it: two ``epoll_ctl`` calls and a loop turn per write, about a tenth
    of the event loop per SSE event with a thousand streams (bench/RESULTS.md). asyncio's own
    transports try ``send()`` first, as this does; what the socket does not take (and anything
    while data is queued, or under TLS) goes through Twisted's queue unchanged, so ordering,
    flow control and connection loss stay Twisted's."""
    if getattr(connection_class, "_sends_at_once", False):
        return
    queued_write, queued_write_sequence = connection_class.write, connection_class.writeSequence

    def write(self, data):
        if self._joining is not None:
            return self._joining.append(data)
        if data and _idle(self):
            data = _send_some(self, data)
        if data:
            queued_write(self, data)

    def write_sequence(self, iovec):
        if self._joining is not None:
            return self._joining.extend(iovec)
        if iovec and _idle(self):
            return write(self, b"".join(iovec))
        queued_write_sequence(self, iovec)

    connection_class.write, connection_class.writeSequence = write, write_sequence
    connection_class._joining = None  # the writes writes_joined() holds back, in order
    connection_class._sends_at_once = True


@contextlib.contextmanager
def writes_joined(connection):
    """Hold back what is written to ``connection`` inside, and write it as one piece at the end
    (a connection that does not send at once joins its writes anyway)."""
    if not getattr(connection, "_sends_at_once", False) or connection._joining is not None:
        yield
        return
    connection._joining = []
    try:
        yield
    finally:
        parts, connection._joining = connection._joining, None
        if parts:
            connection.write(b"".join(parts))


def _idle(connection) -> bool:
    return (connection.connected and not connection.TLS and not connection.disconnecting
            and not connection._writeDisconnected and not connection.dataBuffer
            and not connection._tempDataBuffer)


def _send_some(connection, data: bytes) -> bytes:
    """Send what the socket takes now; returns the rest (all of it on an error, which the
    queued write then reports the way Twisted does)."""
    sent = connection.writeSomeData(data)
    if isinstance(sent, int) and sent > 0:
        return data[sent:]
    return data
