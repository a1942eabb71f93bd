"""Cursors: how far a connection has read a session's streams, written as one SSE event id.

The 2024-11-05 HTTP+SSE transport sends every message of a session on one SSE stream, while
this server keeps each request's messages on a stream of its own (as Streamable HTTP does). A
connection reads several streams at once, so the id of an event it sends must say how far it
has read each of them: "the client SHOULD ... include the last received event ID in the
Last-Event-ID header" is then enough to resume without losing or repeating a message, which
the original transport never offered.

The session's streams are numbered in the order they were opened (entry 0 is the session's
GET stream, which never ends). A cursor holds the session id, ``known`` (entries ``0 ..
known-1`` have been taken in by the connection) and the position read in each taken-in stream
that has not ended. A taken-in stream absent from ``open`` has ended and its last message was
sent before this event; a stream numbered ``known`` or above is read from its start.

    <session id>:<known>:<entry>.<position>[:<entry>.<position>...]

Positions are ``<ms>-<seq>`` (the event store's), or ``0-0`` for a stream nothing was read
from yet. No Django, no I/O.
"""
import re
from dataclasses import dataclass

from .errors import InvalidRequest

#: Streams one cursor may hold open; a connection takes in no more until some end (the id,
#: sent back in a Last-Event-ID header, stays well under the 16 KiB a header line may take).
MAX_OPEN = 256
#: Position of a stream that nothing was read from yet.
START = "0-0"

_CURSOR = re.compile(r"([A-Za-z0-9_-]{22,128}):([0-9]{1,9})((?::[0-9]{1,9}\.[0-9]{1,20}-[0-9]{1,20})*)")
_ENTRY = re.compile(r":([0-9]{1,9})\.([0-9]{1,20}-[0-9]{1,20})")


@dataclass(frozen=True)
class Cursor:
    session_id: str
    #: Entries of the session's stream list the connection has taken in.
    known: int
    #: ``(entry, position)`` of each taken-in stream that has not ended, by entry.
    open: tuple = ()

    def __str__(self):
        return f"{self.session_id}:{self.known}" + "".join(f":{entry}.{position}" for entry, position in self.open)

    @classmethod
    def parse(cls, value: str) -> "Cursor":
        """Raises InvalidRequest for anything this server did not issue."""
        match = _CURSOR.fullmatch(value.strip())
        if match is None:
            raise InvalidRequest("Last-Event-ID is not an event id this server issued.")
        known = int(match.group(2))
        entries = tuple((int(entry), position) for entry, position in _ENTRY.findall(match.group(3)))
        indexes = [entry for entry, _ in entries]
        if len(entries) > MAX_OPEN or indexes != sorted(set(indexes)) or any(i >= known for i in indexes):
            raise InvalidRequest("Last-Event-ID is not an event id this server issued.")
        return cls(match.group(1), known, entries)
