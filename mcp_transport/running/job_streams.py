"""A background job's stream, read from any web process: followed from a position until its
final event (what a 2026-07-28 call relays, eras/modern_2026/jobs.py, and what ``tasks/stream``
sends, eras/modern_2026/task_streams.py), read from a numbered entry on, and what a replay of it
costs its caller."""
from contextlib import aclosing
from typing import AsyncIterator, Optional

from ..conf import get_config
from ..connections import keys
from ..protocol.jsonrpc import dumps
from ..state import quotas
from ..state.bell import doorbell
from ..storage import Numbered, StoredEvent, get_event_store
from . import streams


async def events_after(job, position: str) -> AsyncIterator[StoredEvent]:
    """The job's events after ``position``, as they come, until its final one (included): the
    stream's tail (streams.tail) on its doorbell, subscribed before the first read, and, while
    the doorbell is silent, a lost worker's job answered for (streams.answer_orphan). Close it
    with ``contextlib.aclosing`` when leaving early: the subscription goes with it."""
    session_id, stream_key = job.session_id, job.stream_key
    quiet = min(get_config()["KEEPALIVE_SECONDS"], get_config()["HEARTBEAT_SECONDS"])

    async def on_quiet():
        await streams.answer_orphan(session_id, stream_key)
        return True

    async with doorbell().listen(keys().stream_bell(session_id, stream_key)) as bell, \
            aclosing(streams.tail(session_id, stream_key, position, bell, quiet, on_quiet)) as events:
        async for event in events:
            yield event


async def read_numbered(job, first: dict, start: int) -> Optional[Numbered]:
    """The job's stream from its ``start``-th entry on, numbered from its first, which holds the
    message ``first``; None when the store no longer has that one. What is read is what follows
    ``start`` (and the entry before it, without its message): not the stream before it."""
    return await get_event_store().read_numbered(job.session_id, job.stream_key, first, start)


async def charge_replay(call, messages: list) -> None:
    """REPLAY_BYTES_PER_CALLER for messages a caller is sent again: 429 with Retry-After once its
    window's replays are spent, before any of them is sent."""
    size = sum(len(dumps(message)) for message in messages)
    principal_key = call.principal.key if call.principal is not None else ""
    await quotas.charge_replay(principal_key, call.address, size)
