"""What Redis knows about sessions right now, fetched for a whole admin page at once.

A page of sessions costs a fixed number of Redis round trips (the processes' stream gauges, one
pipeline of per-session counters, two for the store's buffers), however many rows it shows.
"""
from dataclasses import dataclass, field

from asgiref.sync import async_to_sync

from ..state import metrics
from ..storage import get_event_store


@dataclass
class LiveStats:
    open_streams: int = 0
    #: Events the event store keeps, by stream key.
    buffered_by_stream: dict = field(default_factory=dict)
    #: resumes, replays, replay_failures, replayed_events (metrics.py).
    counters: dict = field(default_factory=dict)

    @property
    def buffered(self) -> int:
        return sum(self.buffered_by_stream.values())

    @property
    def resumes(self) -> int:
        return self.counters.get("resumes", 0)

    @property
    def replays(self) -> int:
        return self.counters.get("replays", 0)

    @property
    def replay_failures(self) -> int:
        return self.counters.get("replay_failures", 0)


async def _fetch(session_ids) -> dict:
    session_ids = list(session_ids)
    open_streams = await metrics.open_streams_per_session()
    counters = await metrics.session_counters(session_ids)
    buffered = await get_event_store().buffered(session_ids)
    return {session_id: LiveStats(open_streams.get(session_id, 0), buffered.get(session_id, {}),
                                  counters.get(session_id, {}))
            for session_id in session_ids}


fetch = async_to_sync(_fetch)


async def _sessions_streaming() -> list:
    return [session_id for session_id, count in (await metrics.open_streams_per_session()).items() if count]


#: Ids of the sessions that have an open SSE stream on some process now.
sessions_streaming = async_to_sync(_sessions_streaming)
