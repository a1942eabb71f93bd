"""The contract every event store keeps, run against each backend (``backend`` fixture), as
django-debug-toolbar's CommonStoreTestsMixin does for its stores."""
import asyncio

import pytest

from mcp_transport.state.bell import doorbell
from mcp_transport.connections import keys
from mcp_transport.protocol.ids import EventId
from mcp_transport.protocol.jsonrpc import dumps
from mcp_transport.storage import Replay, UnknownEvent
from mcp_transport.storage.persist import all_rows

from .helpers import append_many, notification, orm

pytestmark = pytest.mark.django_db(transaction=True)


async def evicted(store, reason):
    return (await store.stats())["evicted"][reason]


# -- order, ids, reading ------------------------------------------------------------------------

async def test_append_then_read_everything_in_order(store, session_id, stream_key):
    ids = await append_many(store, session_id, stream_key, 5)
    events = await store.read_after(session_id, stream_key, "0-0")
    assert [event.id for event in events] == ids
    assert [event.message for event in events] == [notification(i) for i in range(5)]
    assert all(event.id.stream == stream_key for event in events)


async def test_ids_are_unique_and_increasing_under_concurrent_appends(store, session_id, stream_key):
    ids = await asyncio.gather(*(store.append(session_id, stream_key, notification(i)) for i in range(200)))
    assert len(set(ids)) == 200
    events = await store.read_after(session_id, stream_key, "0-0")
    assert [event.id for event in events] == sorted(ids, key=lambda event_id: event_id.sort_key)
    keys_in_order = [event.id.sort_key for event in events]
    assert keys_in_order == sorted(set(keys_in_order))


async def test_read_after_is_strictly_after(store, session_id, stream_key):
    ids = await append_many(store, session_id, stream_key, 4)
    assert [e.id for e in await store.read_after(session_id, stream_key, ids[1].position)] == ids[2:]
    assert await store.read_after(session_id, stream_key, ids[-1].position) == []


async def test_read_after_of_a_stream_never_written(store, session_id, stream_key):
    assert await store.read_after(session_id, stream_key, "0-0") == []


async def test_replay_after_is_strictly_after_in_order(store, session_id, stream_key):
    ids = await append_many(store, session_id, stream_key, 6)
    replay = await store.replay_after(session_id, ids[2])
    assert isinstance(replay, Replay) and replay.source == store.source
    assert [event.id for event in replay] == ids[3:]
    assert [event.message["params"]["progress"] for event in replay] == [3, 4, 5]
    assert await store.replay_after(session_id, ids[-1]) == []
    assert (await store.stats())["replay_hits"][store.source] == 2


async def test_final_flag_round_trips(store, session_id, stream_key):
    first = await store.append(session_id, stream_key, None)
    await store.append(session_id, stream_key, notification(1))
    await store.append(session_id, stream_key, {"jsonrpc": "2.0", "id": 7, "result": {}}, final=True)
    events = await store.replay_after(session_id, first)
    assert [event.final for event in events] == [False, True]
    assert events[-1].message == {"jsonrpc": "2.0", "id": 7, "result": {}}
    assert [event.final for event in await store.read_after(session_id, stream_key, "0-0")] == [False, False, True]


async def test_priming_event_round_trips(store, session_id, stream_key):
    priming = await store.append(session_id, stream_key, None)
    terminal = await store.append(session_id, stream_key, None, final=True)
    events = await store.read_after(session_id, stream_key, "0-0")
    assert [(event.id, event.message, event.final) for event in events] == [(priming, None, False),
                                                                           (terminal, None, True)]
    assert [event.id for event in await store.replay_after(session_id, priming)] == [terminal]


async def test_append_rings_the_stream_doorbell(store, session_id, stream_key):
    async with doorbell().listen(keys().stream_bell(session_id, stream_key)) as subscription:
        await store.append(session_id, stream_key, notification(0))
        assert await subscription.wait(5) is not None


# -- ids are only meaningful inside their own session and stream (GHSA-84j6-jc92-77jm) --------

async def test_unknown_id_is_unknown(store, session_id, stream_key):
    ids = await append_many(store, session_id, stream_key, 3)
    for event_id in (EventId(stream_key, "99999999999999-0"), EventId("0123456789abcdef", ids[0].position),
                     EventId(stream_key, f"{ids[1].sort_key[0]}-{ids[1].sort_key[1] + 1000}")):
        with pytest.raises(UnknownEvent) as info:
            await store.replay_after(session_id, event_id)
        assert info.value.reason == "unknown"
    assert (await store.stats())["replay_failures"]["unknown"] == 3


async def test_id_of_another_session_is_unknown(store, stream_key):
    victim, attacker = "victim-session-0000000000000", "attacker-session-00000000000"
    await append_many(store, attacker, stream_key, 2)  # the same stream key, in the attacker's session
    await asyncio.sleep(0.005)
    stolen = await append_many(store, victim, stream_key, 3)
    await store.flush()
    for event_id in stolen:
        with pytest.raises(UnknownEvent):
            await store.replay_after(attacker, event_id)
    replay = await store.replay_after(victim, stolen[0])
    assert [event.id for event in replay] == stolen[1:]


async def test_id_of_another_stream_does_not_replay_this_one(store, session_id):
    other, this = "0" * 16, "f" * 16
    mine = await append_many(store, session_id, this, 3)
    await asyncio.sleep(0.005)
    theirs = await append_many(store, session_id, other, 3)
    await store.flush()
    with pytest.raises(UnknownEvent):
        await store.replay_after(session_id, EventId(this, theirs[0].position))
    replay = await store.replay_after(session_id, EventId(other, theirs[0].position))
    assert [event.id for event in replay] == theirs[1:]
    assert not {event.id for event in replay} & set(mine)


# -- ring limits ---------------------------------------------------------------------------------

async def test_maxlen_trims_the_oldest_and_counts_capacity(make_store, session_id, stream_key):
    store = make_store(maxlen=5)
    ids = await append_many(store, session_id, stream_key, 8)
    assert [event.id for event in await store.read_after(session_id, stream_key, "0-0")] == ids[3:]
    assert await evicted(store, "capacity") == 3
    await store.flush()
    if store.replays_evicted:  # a durable copy still has them
        assert [event.id for event in await store.replay_after(session_id, ids[0])] == ids[1:]
    else:
        with pytest.raises(UnknownEvent) as info:
            await store.replay_after(session_id, ids[0])
        assert info.value.reason == "evicted"
    assert [event.id for event in await store.replay_after(session_id, ids[3])] == ids[4:]


async def test_read_all_includes_what_the_ring_trimmed_while_a_durable_copy_has_it(make_store, session_id,
                                                                                    stream_key):
    """tasks/stream numbers a task's events from its first one (eras/modern_2026/task_streams.py)."""
    store = make_store(maxlen=5)
    ids = await append_many(store, session_id, stream_key, 8)
    await store.flush()
    kept = [event.id for event in await store.read_all(session_id, stream_key)]
    assert kept == (ids if store.replays_evicted else ids[3:])
    assert await store.read_all(session_id, "never-written") == []


async def numbered_ids(store, session_id, stream_key, start, first=None):
    """(event ids, the previous entry's (id, final), count) of ``read_numbered`` from ``start``."""
    found = await store.read_numbered(session_id, stream_key, first or notification(0), start)
    if found is None:
        return None
    previous = (found.previous.id, found.previous.final) if found.previous is not None else None
    return [event.id for event in found.events], previous, found.count


async def test_read_numbered_gives_the_entries_from_an_index_and_the_one_before(store, session_id, stream_key):
    """tasks/stream resumes ``after`` a seq, the index of its entry (eras/modern_2026/task_streams.py)."""
    ids = await append_many(store, session_id, stream_key, 7)
    ids.append(await store.append(session_id, stream_key, notification(7), final=True))
    await store.flush()
    assert await numbered_ids(store, session_id, stream_key, 0) == (ids, None, 8)
    for start in (1, 5, 7):
        assert await numbered_ids(store, session_id, stream_key, start) == (ids[start:], (ids[start - 1], False), 8)
    assert await numbered_ids(store, session_id, stream_key, 8) == ([], (ids[7], True), 8)  # after the last
    assert (await numbered_ids(store, session_id, stream_key, 9))[::2] == ([], 8)  # past it
    found = await store.read_numbered(session_id, stream_key, notification(0), 6)
    assert [event.message for event in found.events] == [notification(6), notification(7)]
    assert found.events[-1].final
    assert await numbered_ids(store, session_id, stream_key, 0, first=notification(1)) is None  # not its first
    assert await numbered_ids(store, session_id, "never-written", 0) is None


async def test_read_numbered_counts_from_a_first_the_ring_trimmed_while_a_durable_copy_has_it(
        make_store, session_id, stream_key):
    store = make_store(maxlen=5)
    ids = await append_many(store, session_id, stream_key, 12)
    await store.flush()
    if not store.replays_evicted:  # the first is gone, and the numbering with it
        assert await numbered_ids(store, session_id, stream_key, 3) is None
        return
    assert await numbered_ids(store, session_id, stream_key, 0) == (ids, None, 12)
    for start in (1, 3, 6, 7, 8, 11, 12):  # in the database, across, in the ring
        assert await numbered_ids(store, session_id, stream_key, start) == (
            ids[start:], (ids[start - 1], False), 12), start
    found = await store.read_numbered(session_id, stream_key, notification(0), 6)
    assert [event.message for event in found.events] == [notification(i) for i in range(6, 12)]


async def test_ttl_expires_a_quiet_stream(make_store, session_id, stream_key):
    store = make_store(ttl=1)
    ids = await append_many(store, session_id, stream_key, 3)
    await store.flush()
    await asyncio.sleep(1.2)
    if store.replays_evicted:  # the Redis store falls back to the database
        replay = await store.replay_after(session_id, ids[0])
        assert ([event.id for event in replay], replay.source) == (ids[1:], "database")
    else:
        with pytest.raises(UnknownEvent) as info:
            await store.replay_after(session_id, ids[0])
        assert info.value.reason == "unknown"
    stats = await store.stats()
    assert stats["evicted"]["ttl"] == 3
    assert stats["buffer_entries"] == 0


async def test_session_cap_evicts_the_sessions_oldest_events(make_store, session_id):
    store = make_store(session_max_events=10)
    first, second = "a" * 16, "b" * 16
    early = await append_many(store, session_id, first, 6)
    await asyncio.sleep(0.005)
    late = await append_many(store, session_id, second, 6)
    assert [event.id for event in await store.read_after(session_id, first, "0-0")] == early[2:]
    assert [event.id for event in await store.read_after(session_id, second, "0-0")] == late
    assert await evicted(store, "session_cap") == 2
    assert (await store.stats())["buffer_entries"] == 10


async def test_session_cap_leaves_other_sessions_alone(make_store, stream_key):
    store = make_store(session_max_events=3)
    await append_many(store, "session-one-00000000000000", stream_key, 3)
    await append_many(store, "session-two-00000000000000", stream_key, 3)
    assert len(await store.read_after("session-one-00000000000000", stream_key, "0-0")) == 3
    assert await evicted(store, "session_cap") == 0


# -- delete --------------------------------------------------------------------------------------

async def test_delete_session_removes_its_events_only(store, stream_key):
    doomed, kept = "doomed-session-000000000000", "kept-session-00000000000000"
    doomed_ids = await append_many(store, doomed, stream_key, 3)
    await append_many(store, doomed, "g", 2)
    kept_ids = await append_many(store, kept, stream_key, 3)
    await store.flush()
    await store.delete_session(doomed)
    assert await store.read_after(doomed, stream_key, "0-0") == []
    assert await store.read_after(doomed, "g", "0-0") == []
    with pytest.raises(UnknownEvent):
        await store.replay_after(doomed, doomed_ids[0])
    assert [event.id for event in await store.replay_after(kept, kept_ids[0])] == kept_ids[1:]
    assert (await store.stats())["buffer_entries"] == 3
    if getattr(store, "table", None) is not None:
        rows = await orm(store, lambda: sorted(all_rows().filter(session_id__in=[doomed, kept])
                                               .values_list("session_id", flat=True).distinct()))
        assert rows == [kept]


async def test_delete_sessions_removes_the_events_of_each_and_only_theirs(store, stream_key):
    doomed = [f"doomed-{i}-session-0000000000000" for i in range(3)]
    kept = "kept-session-00000000000000"
    for session_id in doomed:
        await append_many(store, session_id, stream_key, 2)
    kept_ids = await append_many(store, kept, stream_key, 3)
    await store.flush()
    await store.delete_sessions(doomed)
    for session_id in doomed:
        assert await store.read_after(session_id, stream_key, "0-0") == []
    assert [event.id for event in await store.replay_after(kept, kept_ids[0])] == kept_ids[1:]
    assert (await store.stats())["buffer_entries"] == 3
    if getattr(store, "table", None) is not None:
        rows = await orm(store, lambda: set(all_rows().filter(session_id__in=[*doomed, kept])
                                            .values_list("session_id", flat=True)))
        assert rows == {kept}


async def test_buffered_counts_events_per_session_and_stream(store, stream_key):
    """What the admin shows per session: events kept, by stream, for many sessions at once."""
    first, second, idle = "first-session-0000000000000", "second-session-000000000000", "idle-session-00000000000000"
    await append_many(store, first, stream_key, 3)
    await append_many(store, first, "g", 2)
    await append_many(store, second, stream_key, 4)
    await store.flush()
    found = await store.buffered([first, second, idle])
    assert found == {first: {stream_key: 3, "g": 2}, second: {stream_key: 4}, idle: {}}
    await store.delete_session(first)
    assert (await store.buffered([first]))[first] == {}
    assert await store.buffered([]) == {}


async def test_stats_shape(store):
    stats = await store.stats()
    assert set(stats) == {"buffer_entries", "events_appended", "evicted", "replay_hits", "replay_failures"}
    assert set(stats["evicted"]) == {"capacity", "ttl", "session_cap"}
    assert set(stats["replay_failures"]) == {"unknown", "evicted"}


# -- SESSION_MAX_BYTES: bytes of messages kept per session ---------------------------------------

def sized(i, size=1000):
    """A notification whose compact JSON is ``size`` bytes."""
    message = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"i": i, "data": ""}}
    message["params"]["data"] = "x" * (size - len(dumps(message)))
    assert len(dumps(message)) == size
    return message


async def kept_of(store, session_id, streams) -> list:
    """The events the store keeps of the session's ``streams``, oldest first."""
    events = [event for key in streams for event in await store.read_after(session_id, key, "0-0")]
    return sorted(events, key=lambda event: event.id.sort_key)


async def test_session_max_bytes_evicts_the_sessions_oldest_events(make_store, session_id):
    """A 4 MiB echo over SSE kept 8 MB per session for an hour (issue 10): past the byte cap,
    the session's oldest events go first, across its streams, and count as session_cap."""
    store = make_store(session_max_bytes=10_000, maxlen=100)
    streams = ["a" * 16, "b" * 16]
    appended = []
    for i in range(30):
        appended.append(await store.append(session_id, streams[i % 2], sized(i)))
        await asyncio.sleep(0.002)  # positions of the two streams interleave in time
    kept = await kept_of(store, session_id, streams)
    assert sum(len(dumps(event.message)) for event in kept) == 10 * 1000
    assert [event.id for event in kept] == appended[-10:]
    assert await evicted(store, "session_cap") == 20
    assert (await store.stats())["buffer_entries"] == 10


async def test_session_max_bytes_counts_what_the_ring_trimmed(make_store, session_id, stream_key):
    """Events the ring trimmed (maxlen) or a DELETE dropped no longer count against the cap."""
    store = make_store(session_max_bytes=6_000, maxlen=4)
    for i in range(10):
        await store.append(session_id, stream_key, sized(i))
    other = "c" * 16
    ids = [await store.append(session_id, other, sized(i, 500)) for i in range(4)]
    # 4 x 1000 + 4 x 500 = 6000: nothing of the second stream had to go.
    assert [event.id for event in await store.read_after(session_id, other, "0-0")] == ids
    assert len(await store.read_after(session_id, stream_key, "0-0")) == 4
    assert await evicted(store, "session_cap") == 0
    await store.delete_session(session_id)
    fresh = [await store.append(session_id, other, sized(i, 1500)) for i in range(4)]
    assert [event.id for event in await store.read_after(session_id, other, "0-0")] == fresh


async def test_session_max_bytes_leaves_other_sessions_and_priming_events_alone(make_store, stream_key):
    store = make_store(session_max_bytes=2_000)
    heavy, light = "heavy-session-00000000000000", "light-session-00000000000000"
    primed = [await store.append(light, stream_key, None) for _ in range(5)]
    light_ids = [await store.append(light, stream_key, sized(i)) for i in range(2)]
    for i in range(6):
        await store.append(heavy, stream_key, sized(i))
    assert [event.id for event in await store.read_after(light, stream_key, "0-0")] == primed + light_ids
    assert len(await store.read_after(heavy, stream_key, "0-0")) == 2
    assert await evicted(store, "session_cap") == 4


async def test_an_event_larger_than_session_max_bytes_is_not_kept(make_store, session_id, stream_key):
    """It cannot fit: it goes, with everything the session kept before it."""
    store = make_store(session_max_bytes=2_500)
    before = [await store.append(session_id, stream_key, sized(i)) for i in range(2)]
    too_big = await store.append(session_id, stream_key, sized(9, 3000))
    assert await store.read_after(session_id, stream_key, "0-0") == []
    assert await evicted(store, "session_cap") == 3
    after = await store.append(session_id, stream_key, sized(10))
    assert [event.id for event in await store.read_after(session_id, stream_key, "0-0")] == [after]
    assert after.sort_key > too_big.sort_key > before[-1].sort_key


async def test_without_session_max_bytes_nothing_is_evicted_for_size(make_store, session_id, stream_key):
    store = make_store(session_max_bytes=None)
    for i in range(5):
        await store.append(session_id, stream_key, sized(i, 20_000))
    assert len(await store.read_after(session_id, stream_key, "0-0")) == 5
    assert await evicted(store, "session_cap") == 0
