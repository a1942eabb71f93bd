"""The event-store API. A stream lives inside one session; ids never cross sessions."""
from dataclasses import dataclass
from typing import Optional

from ..protocol.ids import EventId


class UnknownEvent(Exception):
    """The event id names no stream of this session, or an event that is no longer kept."""


@dataclass(frozen=True)
class StoredEvent:
    id: EventId
    #: The JSON-RPC message; None for a priming event or a terminal marker.
    message: Optional[dict]
    #: The last event of a POST stream (its response, or the end of a cancelled request).
    final: bool = False


class EventStore:
    async def append(self, session_id: str, stream_key: str, message: Optional[dict], *,
                     final: bool = False) -> EventId:
        """Store one event and ring the stream's doorbell; returns the new event's id."""
        raise NotImplementedError("EventStore.append() must be implemented")

    async def read_after(self, session_id: str, stream_key: str, position: str) -> list:
        """Events of the stream strictly after ``position`` ("0-0" for all), in order."""
        raise NotImplementedError("EventStore.read_after() must be implemented")

    async def replay_after(self, session_id: str, event_id: EventId) -> list:
        """Events after ``event_id`` in its stream; UnknownEvent if the id is not kept here."""
        raise NotImplementedError("EventStore.replay_after() must be implemented")

    async def delete_session(self, session_id: str) -> None:
        """Drop every stream of the session (DELETE, termination)."""
        raise NotImplementedError("EventStore.delete_session() must be implemented")
