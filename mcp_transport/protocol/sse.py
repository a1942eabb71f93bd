"""Server-Sent Events: encoding frames and decoding a byte stream.

Implements https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation
(the section spec 2025-11-25 basic/transports links). The decoder is for tests and tooling; the
server only encodes.
"""
import codecs
import re
from dataclasses import dataclass
from typing import Optional

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, kw_only=True)
class SseEvent:
    #: The payload; ``""`` with an id is MCP's priming event.
    data: str = ""
    id: Optional[str] = None
    event: Optional[str] = None
    #: Reconnection time in milliseconds.
    retry: Optional[int] = None


def encode(event: SseEvent) -> bytes:
    """One complete frame, ending with the blank line that dispatches it."""
    lines = []
    if event.id is not None:
        _check_field("id", event.id)
        lines.append(f"id: {event.id}")
    if event.event is not None:
        _check_field("event", event.event)
        lines.append(f"event: {event.event}")
    if event.retry is not None:
        lines.append(f"retry: {int(event.retry)}")
    # Each line of the payload needs its own data field; an empty payload still gets one,
    # because "data:" alone dispatches an event whose data is "" (the priming event).
    lines.extend(f"data: {line}" for line in _LINE_BREAK.split(event.data))
    return ("\n".join(lines) + "\n\n").encode("utf-8")


def message_frame(data: bytes, event_id=None) -> bytes:
    """An MCP message event: ``data`` is one JSON-RPC message already encoded by
    ``jsonrpc.dumps``, which never holds a line break, so one ``data`` line is the whole payload
    (what ``encode`` would build, without splitting and checking it again). Without an id on
    2026-07-28 streams: "CL26 #9 removes the Last-Event-ID header and SSE event IDs"."""
    if event_id is None:
        return b"event: message\ndata: %s\n\n" % data
    return b"id: %s\nevent: message\ndata: %s\n\n" % (str(event_id).encode(), data)


def comment(text: str = "") -> bytes:
    """A comment line (``: ping``): ignored by clients, keeps proxies from timing out."""
    _check_field("comment", text)
    return f": {text}\n\n".encode("utf-8")


def _check_field(name, value):
    if _LINE_BREAK.search(value) or "\x00" in value:
        raise ValueError(f"An SSE {name} cannot contain a line break or NUL.")


class SseDecoder:
    """Incremental decoder: ``feed(bytes)`` returns the events completed so far.

    Chunks may split anywhere, even between the CR and LF of one line break.
    """

    def __init__(self):
        self._buffer = ""
        self._pending_cr = False
        # Incremental, so a multi-byte character split across chunks decodes whole; invalid
        # bytes become U+FFFD (the SSE spec's "UTF-8 decode" with replacement).
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._started = False
        self._reset_event()
        # NOTE: as the SSE spec says, the last event id is not reset between events.
        self.last_event_id = ""
        #: The latest reconnection time in ms, also from blocks that dispatch no event.
        self.retry = None

    def _reset_event(self):
        self._data = []
        self._event = None
        self._retry = None

    def feed(self, chunk: bytes) -> list:
        text = self._decode(chunk)
        events = []
        for line in self._lines(text):
            event = self._process_line(line)
            if event is not None:
                events.append(event)
        return events

    def _decode(self, chunk):
        text = self._utf8.decode(chunk)
        if not self._started and text:
            self._started = True
            text = text.removeprefix("\ufeff")  # "One leading U+FEFF BOM character must be ignored"
        return text

    def _lines(self, text):
        if not text:
            return []  # an empty chunk (or half a character) must not forget a pending CR
        if self._pending_cr and text.startswith("\n"):
            text = text[1:]  # the LF of a CRLF split across chunks
        self._pending_cr = False
        self._buffer += text
        *lines, self._buffer = _LINE_BREAK.split(self._buffer)
        # A trailing CR ends its line now; if the next chunk starts with LF, that LF belongs to it.
        self._pending_cr = bool(lines) and self._buffer == "" and text.endswith("\r")
        return lines

    def _process_line(self, line):
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\x00" not in value:
            self.last_event_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self._retry = self.retry = int(value)
        return None

    def _dispatch(self):
        data, event, retry = self._data, self._event, self._retry
        self._reset_event()
        if not data:
            # "If the data buffer is an empty string, ... return" (no event is dispatched),
            # but the last event id and retry have been taken.
            return None
        return SseEvent(data="\n".join(data), id=self.last_event_id or None, event=event, retry=retry)


def retry_frame(milliseconds: int) -> bytes:
    """A block with only a ``retry`` field: sets the reconnection time, dispatches no event.

    "If the server does close the connection prior to terminating the SSE stream, it SHOULD
    send an SSE event with a standard retry field before closing" -- spec 2025-11-25 transports
    """
    return f"retry: {int(milliseconds)}\n\n".encode("ascii")
