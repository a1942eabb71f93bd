"""Limits daphne enforces while a request arrives, before the application (or a temp file) gets it.

Daphne hands a request to the application only once Twisted has read all of it, and Twisted
spools a body to a temporary file as it comes: a body declared as 1 GiB is written to disk
before ``MAX_REQUEST_BYTES`` is ever compared with it. A connection that sends one byte every
few seconds resets Twisted's idle timeout each time and is held forever. So the limits that
must come before the resource is spent live here, in the HTTP/1.1 channel:

- ``MAX_REQUEST_BYTES``: a declared ``Content-Length`` above it is refused as soon as the
  headers end (no ``100 Continue``, nothing read or stored); a chunked body is counted as it is
  decoded and refused at the chunk that crosses it. Only on the MCP endpoint (the paths
  ``mcp_path()`` routes): other paths are Django's and the front proxy's business.
- ``MAX_HEADER_BYTES`` (the request line and header lines) and ``MAX_HEADERS``: 431.
- ``REQUEST_RECEIVE_SECONDS``: from a request's first byte to its last; slower gets 408.
- ``IDLE_CONNECTION_SECONDS``: the idle timeout between requests (Twisted's, kept with one
  timer per connection instead of one per request).

A refusal writes the whole response and half-closes the connection, then lingers as nginx does:
it reads and discards what the client still sends (most clients send their whole body before
they read), up to twice MAX_REQUEST_BYTES, then stops reading (the client's sends block on a
full TCP window instead of filling our memory or disk), and aborts the connection
``LINGER_SECONDS`` after the refusal. Closing at once would make the kernel answer the unread
body with a reset, which can destroy the response before the client reads it.

The seam: daphne's ``HTTPFactory`` builds each connection with Twisted's
``HTTPFactory.protocol``; ``install()`` points it at a factory of ``LimitedChannel`` (an
``HTTPChannel`` subclass) wrapped as Twisted wraps its own. HTTP/2 (negotiated only over TLS)
keeps Twisted's channel: put a front proxy's limits in front of it (README).
"""
import functools
import time
import weakref

from twisted.web import http as twisted_http

from ..state import metrics
from ..conf import get_config
from ..protocol import http
from . import tcp_writes
from .endpoints import MCP_PATHS

#: Seconds a refused connection stays half-open for the client to read the response.
LINGER_SECONDS = 5
#: The open connections of this process (a process that stops closes them: ``close_connections``).
open_channels = weakref.WeakSet()
#: This process is stopping: a connection closes after its response, an idle one at once.
_closing = False


def close_connections() -> int:
    """The process stops: every connection ends after its response (an idle kept-alive one now),
    so that its client's next request opens a connection to another process. Returns how many
    are still open."""
    global _closing
    _closing = True
    for channel in list(open_channels):
        channel.close_when_idle()
    return len(open_channels)


def install(factory_class) -> bool:
    """Make the connections ``factory_class`` (daphne's HTTPFactory) builds enforce the limits.
    Idempotent; False when this Twisted has no ``_GenericHTTPChannelProtocol`` to wrap with."""
    if getattr(factory_class, "enforces_mcp_limits", False):
        return True
    if not hasattr(twisted_http, "_GenericHTTPChannelProtocol"):
        return False
    factory_class.protocol = _limited_protocol  # called as self.protocol() by buildProtocol
    factory_class.log = _shown_log(factory_class.log)
    factory_class.enforces_mcp_limits = True
    return True


def _shown_log(log):
    """Twisted's access log, written only where daphne shows it: at verbosity 0 and 1 (its
    default) daphne sends Twisted's log nowhere, and formatting the line for nobody was 5 % of a
    busy process. daphne's own access log (``--access-log``) is not this one."""
    @functools.wraps(log)
    def log_request(self, request):
        server = getattr(self, "server", None)
        if server is None or getattr(server, "verbosity", 2) > 1:
            log(self, request)
    return log_request


def _limited_protocol(factory):
    """What Twisted's ``_genericHTTPChannelProtocolFactory`` builds, with our channel inside."""
    return twisted_http._GenericHTTPChannelProtocol(LimitedChannel())


def is_mcp_path(target: bytes) -> bool:
    path = target.split(b"?", 1)[0].decode("latin-1")
    if "://" in path:  # absolute-form request target
        path = "/" + path.split("://", 1)[1].partition("/")[2]
    return any(path.endswith(suffix) for suffix in MCP_PATHS)


def _start_housekeeping():
    import asyncio

    from ..state import control

    asyncio.ensure_future(control.ensure_listening())


@functools.cache
def _counted(request_class):
    """``request_class`` whose body chunks are counted by their channel before being kept."""

    class CountedRequest(request_class):
        def handleContentChunk(self, data):
            if self.channel.body_received(len(data)):
                super().handleContentChunk(data)

        def write(self, data):
            if self.startedWriting or not data:
                return super().write(data)
            # The status line, the headers and the first part of the body in one send (Twisted
            # writes them apart, and tcp_writes.send_at_once sends each write at once): one
            # system call and one packet for a whole JSON reply.
            with tcp_writes.writes_joined(getattr(self.channel, "transport", None)):
                super().write(data)

    CountedRequest.__name__ = CountedRequest.__qualname__ = f"Counted{request_class.__name__}"
    return CountedRequest


class LimitedChannel(twisted_http.HTTPChannel):
    """An HTTP/1.1 channel that refuses requests over the limits while they arrive."""

    _head_bytes = 0
    _header_count = 0
    _body_bytes = 0
    _body_limit = None
    _in_request = False
    _refused = False
    _deadline = None
    #: When the request being received started (reactor time); None between requests.
    _receiving_since = None
    _linger = None
    _discarded = 0
    #: The idle timer, and when the connection last received or finished a request.
    _idle_timer = None
    _active_at = 0.0

    def __init__(self):
        super().__init__()
        config = get_config()
        self.max_body, self.max_head = config["MAX_REQUEST_BYTES"], config["MAX_HEADER_BYTES"]
        self.max_headers, self.receive_seconds = config["MAX_HEADERS"], config["REQUEST_RECEIVE_SECONDS"]
        self.idle_seconds = config["IDLE_CONNECTION_SECONDS"]
        # Twisted's own limits (a bare 400, or a silent close for one long line) stay behind ours.
        self.maxHeaders = max(self.maxHeaders, self.max_headers + 1)
        self.totalHeadersSize = max(self.totalHeadersSize, self.max_head * 2)
        self.MAX_LENGTH = self.max_head

    # daphne sets its own request class on every connection; each gets its body counted.
    @property
    def requestFactory(self):
        factory = self.__dict__.get("_request_factory")
        return factory if factory is not None else _counted(twisted_http.Request)

    @requestFactory.setter
    def requestFactory(self, factory):
        self.__dict__["_request_factory"] = _counted(factory)

    def connectionMade(self):
        self.timeOut = None  # Twisted's idle timeout: replaced by _check_idle
        super().connectionMade()
        open_channels.add(self)
        self._active_at = time.monotonic()
        self._idle_timer = self.callLater(self.idle_seconds, self._check_idle)

    # Twisted asks both on every request (a getsockname() system call, an interface lookup);
    # neither changes during a connection.

    def getHost(self):
        host = self.__dict__.get("_local_address")
        if host is None:
            host = self._local_address = super().getHost()
        return host

    def isSecure(self):
        secure = self.__dict__.get("_secure")
        if secure is None:
            secure = self._secure = super().isSecure()
        return secure

    def setTimeout(self, period):
        if period is None:  # Twisted stops the idle timeout (the connection ends, or turns HTTP/2)
            self._stop_idle_timer()
        return super().setTimeout(period)

    def connectionLost(self, reason):
        open_channels.discard(self)
        self._disarm()
        self._cancel_deadline()
        if self._linger is not None and self._linger.active():
            self._linger.cancel()
        super().connectionLost(reason)

    # -- receiving ---------------------------------------------------------------------------

    def dataReceived(self, data):
        if self._refused:
            return self._discard(len(data))
        self._arm()
        self._active_at = time.monotonic()
        super().dataReceived(data)

    def lineReceived(self, line):
        if self._refused:
            return
        self._arm()
        if self._head_bytes == 0 and line:  # the request line
            target = line.split(b" ")
            self._body_limit = self.max_body if len(target) > 1 and is_mcp_path(target[1]) else None
        self._head_bytes += len(line)
        if self._head_bytes > self.max_head:
            return self.refuse(431, f"The request line and headers are larger than {self.max_head} bytes.",
                               "header_bytes")
        super().lineReceived(line)

    def lineLengthExceeded(self, line):
        self.refuse(431, f"The request line and headers are larger than {self.max_head} bytes.", "header_bytes")

    def headerReceived(self, line):
        if self._refused:
            return False
        self._header_count += 1
        if self._header_count > self.max_headers:
            self.refuse(431, f"The request has more than {self.max_headers} headers.", "headers")
            return False
        return super().headerReceived(line)

    def allHeadersReceived(self):
        if self._refused:
            return
        limit = self._body_limit
        if limit is not None and self.length is not None and self.length > limit:
            # "413 ... the server MAY close the connection" -- RFC 9110 15.5.14; nothing is read.
            return self.refuse(413, http.body_too_large(limit), "body_bytes")
        self._body_bytes = 0
        super().allHeadersReceived()

    def body_received(self, size: int) -> bool:
        """A decoded chunk of the body; False (and the request refused) once it crosses the limit."""
        if self._refused:
            return False
        self._body_bytes += size
        if self._body_limit is not None and self._body_bytes > self._body_limit:
            self.refuse(413, http.body_too_large(self._body_limit), "body_bytes")
            return False
        return True

    def rawDataReceived(self, data):
        if not self._refused:
            super().rawDataReceived(data)

    def allContentReceived(self):
        if self._refused:
            return
        self._disarm()
        self._in_request = True
        self._head_bytes = self._header_count = 0
        super().allContentReceived()

    def requestDone(self, request):
        self._in_request = False
        self._active_at = time.monotonic()
        if _closing:
            self.persistent = False  # Twisted closes the connection once the response is out
        super().requestDone(request)

    def close_when_idle(self):
        """End the connection after the response it serves, or now if it serves none."""
        if self.requests or self.transport is None:
            return  # requestDone closes it (``_closing``); a request still arriving gets its 503
        self.transport.loseConnection()

    # -- the receive deadline and refusals ---------------------------------------------------

    # One timer per connection, not one per request: a keep-alive connection's requests only
    # move ``_receiving_since``, and the timer, when it fires, looks at the request being
    # received then (scheduling and cancelling a timer per request was most of this channel's
    # own cost under load).

    def _arm(self):
        """Start the clock at a request's first byte (not while a response is being served)."""
        if self._receiving_since is None and not self._in_request:
            self._receiving_since = time.monotonic()
            if self._deadline is None:
                self._deadline = self.callLater(self.receive_seconds, self._check_deadline)

    def _disarm(self):
        """The request arrived (or the connection ends): its clock stops; the timer may stay."""
        self._receiving_since = None

    def _check_deadline(self):
        self._deadline = None
        if self._receiving_since is None or self._refused:
            return  # between requests: the next one's first byte sets a timer again
        left = self._receiving_since + self.receive_seconds - time.monotonic()
        if left > 0:  # a later request than the one the timer was set for
            self._deadline = self.callLater(left, self._check_deadline)
            return
        self.refuse(408, f"The request was not received within {self.receive_seconds:g} s.", "receive_seconds")

    # The idle timeout, the same way: Twisted stops its timer once a request has arrived and
    # starts a new one when the response ends (a cancelled and a new timer per request, 4 % of a
    # busy process); this one stays, and when it fires it looks at what the connection did since.

    def _check_idle(self):
        self._idle_timer = None
        if self._handlingRequest or self._refused:  # a response is being served, or refused
            left = self.idle_seconds
        else:
            left = self._active_at + self.idle_seconds - time.monotonic()
        if left > 0:
            self._idle_timer = self.callLater(left, self._check_idle)
        else:
            self.timeoutConnection()

    def _stop_idle_timer(self):
        timer, self._idle_timer = self._idle_timer, None
        if timer is not None and timer.active():
            timer.cancel()

    def _cancel_deadline(self):
        deadline, self._deadline = self._deadline, None
        if deadline is not None and deadline.active():
            deadline.cancel()

    def refuse(self, status: int, message: str, limit: str) -> None:
        """Answer ``status`` now and read nothing more of this connection."""
        self._refused = True
        self._disarm()
        metrics.incr(f"limit_refusals:{limit}")
        _start_housekeeping()  # which flushes the count, even if no request reached the app yet
        transport = self.transport
        if transport is None:
            return
        transport.write(http.refusal_response(status, message))
        transport.loseWriteConnection()
        self._linger = self.callLater(LINGER_SECONDS, transport.abortConnection)

    def _discard(self, size: int) -> None:
        self._discarded += size
        if self._discarded > 2 * self.max_body and self.transport is not None:
            self.transport.pauseProducing()
