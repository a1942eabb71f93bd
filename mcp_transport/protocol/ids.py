"""Session ids, stream keys and SSE event ids: the only place they are built or parsed.

"The session ID SHOULD be globally unique and cryptographically secure ... MUST only contain
visible ASCII characters (ranging from 0x21 to 0x7E)." -- spec 2025-11-25 basic/transports

"Event IDs SHOULD encode sufficient information to identify the originating stream"
-- spec 2025-11-25 basic/transports. An event id is ``<stream key>.<position>``. The stream key
is ``g`` for the session's GET stream or 16 random hex digits for a POST stream (never derived
from the client's request id, which a client chooses). The session is *not* in the id: a stream
is looked up inside the session presenting the id, so another session's id finds nothing.
"""
import re
import secrets
from dataclasses import dataclass

from .errors import InvalidRequest

#: Stream key of a session's standalone GET stream.
GET_STREAM = "g"

_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{22,128}")
# [0-9], not \d: \d also matches non-ASCII digits such as "١".
_EVENT_ID = re.compile(r"(g|[0-9a-f]{16})\.([0-9]{1,20}-[0-9]{1,20})")


#: The largest part of a position (``<ms>-<seq>``): Redis entry ids are unsigned 64-bit.
MAX_POSITION_PART = 2 ** 64 - 1


def new_token(nbytes: int = 24) -> str:
    """``nbytes`` random bytes in base64url that never start with "-": a command line must not
    read an id as an option (``manage.py mcp_sessions terminate <id>``). Drawn again rather than
    patched, so every id that can come out is equally likely (a loss of 0.02 bits)."""
    while (token := secrets.token_urlsafe(nbytes)).startswith("-"):
        pass
    return token


def new_session_id() -> str:
    """192 random bits in base64url: 32 characters of [A-Za-z0-9_-], the first not "-"."""
    return new_token(24)


def is_session_id(value: str) -> bool:
    return bool(_SESSION_ID.fullmatch(value))


def new_stream_key() -> str:
    """64 random bits, so a stream cannot be guessed from anything the client sent."""
    return secrets.token_hex(8)


@dataclass(frozen=True)
class EventId:
    stream: str
    #: Position inside the stream: ``<int>-<int>``, ordered like Redis stream entry ids.
    position: str

    def __str__(self):
        return f"{self.stream}.{self.position}"

    @property
    def sort_key(self):
        major, minor = self.position.split("-")
        return int(major), int(minor)

    @classmethod
    def parse(cls, value: str) -> "EventId":
        match = _EVENT_ID.fullmatch(value.strip())
        if match is None:
            raise InvalidRequest("Last-Event-ID is not an event id this server issued.")
        event_id = cls(match.group(1), match.group(2))
        # Redis entry ids are two unsigned 64-bit integers: a larger one is no id of ours (400),
        # and Redis would refuse it (which must not read as "store unavailable", 503).
        if max(event_id.sort_key) > MAX_POSITION_PART:
            raise InvalidRequest("Last-Event-ID is not an event id this server issued.")
        return event_id
