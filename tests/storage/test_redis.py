"""What only the Redis store does: the database behind it, exact counters, coalesced appends."""
import asyncio

import pytest
from asgiref.sync import async_to_sync
from django.db import connection

from mcp_transport.connections import async_redis
from mcp_transport.storage import UnknownEvent
from mcp_transport.storage.persist import all_rows, stream_rows
from mcp_transport.storage.redis import StoreKeys
from mcp_transport.storage.signals import RedisCounters

from .helpers import append_many, notification, orm

pytestmark = pytest.mark.django_db(transaction=True)


async def lose_redis_copy(session_id):
    """What a FLUSHDB does to one session: its streams and their bookkeeping are gone."""
    names = StoreKeys()
    client = async_redis()
    streams = await client.zrange(names.session_streams(session_id), 0, -1)
    await client.delete(*streams, names.session_streams(session_id))


async def ids_of(events):
    return [event.id for event in events]


async def test_flush_mid_stream_then_replay_comes_from_the_database(stores, session_id, stream_key):
    store = stores()
    before = await append_many(store, session_id, stream_key, 5)
    await store.flush()
    await lose_redis_copy(session_id)
    after = await append_many(store, session_id, stream_key, 3, start=5)
    replay = await store.replay_after(session_id, before[1])
    assert replay.source == "database"
    assert await ids_of(replay) == before[2:] + after
    assert [event.message["params"]["progress"] for event in replay] == [2, 3, 4, 5, 6, 7]
    assert (await store.stats())["replay_hits"] == {"redis": 0, "database": 1, "memory": 0}


async def test_events_not_yet_written_to_the_database_survive_a_flush(stores, session_id, stream_key):
    """Appended, then Redis flushed before the flusher ran: this process's flusher still has
    them, and a replay writes them first."""
    store = stores(flush_interval=60)
    before = await append_many(store, session_id, stream_key, 4)
    await lose_redis_copy(session_id)
    after = await append_many(store, session_id, stream_key, 2, start=4)
    assert await ids_of(await store.replay_after(session_id, before[0])) == before[1:] + after


async def test_live_tail_reads_across_a_flush(stores, session_id, stream_key):
    """A tail at position p when Redis is flushed: read_after(p) gives the events between p and
    the flush (from the database) and the new ones (from Redis), each once."""
    store = stores()
    seen = await append_many(store, session_id, stream_key, 2)
    missed = await append_many(store, session_id, stream_key, 3, start=2)
    await store.flush()
    await lose_redis_copy(session_id)
    new = await append_many(store, session_id, stream_key, 2, start=5)
    assert await ids_of(await store.read_after(session_id, stream_key, seen[-1].position)) == missed + new
    assert await ids_of(await store.read_after(session_id, stream_key, new[0].position)) == new[1:]


async def test_a_trimmed_tail_position_is_read_from_the_database(stores, session_id, stream_key):
    store = stores(maxlen=3)
    ids = await append_many(store, session_id, stream_key, 10)
    await store.flush()
    assert await ids_of(await store.read_after(session_id, stream_key, ids[2].position)) == ids[3:]


async def test_replay_of_an_id_neither_redis_nor_the_database_has(stores, session_id, stream_key):
    store = stores()
    ids = await append_many(store, session_id, stream_key, 2)
    await store.flush()
    await lose_redis_copy(session_id)
    await orm(store, lambda: stream_rows(session_id, stream_key).delete())
    with pytest.raises(UnknownEvent) as info:
        await store.replay_after(session_id, ids[0])
    assert info.value.reason == "unknown"
    assert (await store.stats())["replay_failures"] == {"unknown": 1, "evicted": 0}


async def test_without_persistence_a_trimmed_id_is_evicted(stores, session_id, stream_key):
    store = stores(persist="off", maxlen=3)
    ids = await append_many(store, session_id, stream_key, 5)
    with pytest.raises(UnknownEvent) as info:
        await store.replay_after(session_id, ids[0])
    assert info.value.reason == "evicted"
    assert (await store.stats())["replay_failures"] == {"unknown": 0, "evicted": 1}
    assert await orm(stores(), lambda: all_rows().filter(session_id=session_id).count()) == 0


async def test_without_persistence_a_flushed_stream_is_unknown(stores, session_id, stream_key):
    store = stores(persist="off")
    ids = await append_many(store, session_id, stream_key, 2)
    await lose_redis_copy(session_id)
    with pytest.raises(UnknownEvent) as info:
        await store.replay_after(session_id, ids[0])
    assert info.value.reason == "unknown"


async def test_write_through_is_in_the_database_when_append_returns(stores, session_id, stream_key):
    store = stores(persist="write_through")
    event_id = await store.append(session_id, stream_key, notification(1), final=True)
    row = await orm(store, lambda: stream_rows(session_id, stream_key).get())
    assert (row.position, row.message, row.final) == (event_id.position, notification(1), True)
    assert (row.position_ms, row.position_seq) == event_id.sort_key


@pytest.mark.parametrize("persist_mode", ["batched", "write_through"])
async def test_rows_carry_the_size_session_max_bytes_counts(stores, session_id, stream_key, persist_mode):
    """The database store counts SESSION_MAX_BYTES from ``size``: the Redis store's rows carry it too."""
    from mcp_transport.protocol.jsonrpc import dumps

    store = stores(persist=persist_mode)
    await store.append(session_id, stream_key, None)
    await store.append(session_id, stream_key, notification(1))
    await store.flush()
    sizes = await orm(store, lambda: list(stream_rows(session_id, stream_key)
                                          .order_by("position_ms", "position_seq").values_list("size", flat=True)))
    assert sizes == [0, len(dumps(notification(1)))]


async def test_batched_rows_reach_the_database_within_the_interval(stores, session_id, stream_key):
    store = stores(flush_interval=0.05)
    ids = await append_many(store, session_id, stream_key, 3)
    await asyncio.sleep(0.3)
    positions = await orm(store, lambda: list(stream_rows(session_id, stream_key)
                                              .order_by("position_ms", "position_seq")
                                              .values_list("position", flat=True)))
    assert positions == [event_id.position for event_id in ids]


def slow_database(store, seconds):
    """Every write of the store's database thread takes ``seconds`` longer."""
    run = store.table.run

    async def slower(function, *args):
        await asyncio.sleep(seconds)
        return await run(function, *args)

    store.table.run = slower


@pytest.mark.parametrize("max_unwritten", [5, 1])
async def test_max_unwritten_keeps_every_trimmed_event_in_the_database(stores, session_id, stream_key,
                                                                      max_unwritten):
    """A worker's burst against a slow database: Redis keeps the last 5 events, and a follower in
    another process that fell behind reads the rest from the database, so none may leave Redis
    unwritten. Appends do not wait for the database below the limit."""
    writer, follower = stores(maxlen=5, flush_interval=0, max_unwritten=max_unwritten), stores(maxlen=5)
    slow_database(writer, 0.02)
    ids = await asyncio.gather(*(writer.append(session_id, stream_key, notification(i)) for i in range(40)))
    assert writer._state().flusher.unwritten() <= max_unwritten
    assert await ids_of(await follower.read_after(session_id, stream_key, ids[0].position)) == list(ids[1:])


async def test_below_max_unwritten_an_append_does_not_wait_for_the_database(stores, session_id, stream_key):
    store = stores(flush_interval=0, max_unwritten=100)
    slow_database(store, 5)
    event_id = await asyncio.wait_for(store.append(session_id, stream_key, notification(1)), 2)
    assert await ids_of(await stores().read_after(session_id, stream_key, "0-0")) == [event_id]


async def test_capacity_evictions_are_counted_exactly(stores, session_id):
    store = stores(maxlen=10)
    streams = ["a" * 16, "b" * 16, "c" * 16]
    await asyncio.gather(*(store.append(session_id, streams[i % 3], notification(i)) for i in range(90)))
    stats = await store.stats()
    assert stats["evicted"]["capacity"] == 60
    assert stats["events_appended"] == 90
    assert stats["buffer_entries"] == 30
    for key in streams:
        assert len(await store.read_after(session_id, key, "0-0")) == 10


async def test_session_cap_and_ttl_counters_and_buffer_entries(stores, session_id, stream_key):
    store = stores(ttl=1, session_max_events=4)
    await append_many(store, session_id, stream_key, 6)
    stats = await store.stats()
    assert (stats["evicted"]["session_cap"], stats["buffer_entries"]) == (2, 4)
    await asyncio.sleep(1.2)
    stats = await store.stats()
    assert (stats["evicted"]["ttl"], stats["buffer_entries"]) == (4, 0)


async def test_delete_session_takes_its_events_out_of_the_buffer_count(stores, session_id, stream_key):
    store = stores()
    await append_many(store, session_id, stream_key, 4)
    await append_many(store, "other-session-0000000000000", stream_key, 2)
    await store.delete_session(session_id)
    assert (await store.stats())["buffer_entries"] == 2
    assert not await async_redis().exists(StoreKeys().session_streams(session_id),
                                          StoreKeys().stream(session_id, stream_key))


async def test_coalesced_appends_keep_each_streams_order(stores, session_id):
    store = stores()
    streams = [f"{i:016x}" for i in range(5)]

    async def writer(key):
        return [await store.append(session_id, key, notification(i)) for i in range(40)]

    written = await asyncio.gather(*(writer(key) for key in streams))
    for key, ids in zip(streams, written):
        events = await store.read_after(session_id, key, "0-0")
        assert [event.id for event in events] == ids
        assert [event.message["params"]["progress"] for event in events] == list(range(40))


async def test_an_unencodable_message_fails_only_its_own_append(stores, session_id, stream_key):
    store = stores()
    results = await asyncio.gather(store.append(session_id, stream_key, notification(1)),
                                   store.append(session_id, stream_key, {"bad": object()}),
                                   store.append(session_id, stream_key, notification(2)),
                                   return_exceptions=True)
    assert isinstance(results[1], TypeError)
    assert len(await store.read_after(session_id, stream_key, "0-0")) == 2


@pytest.mark.django_db(transaction=True)
def test_a_sync_caller_s_events_reach_the_database(stores, session_id, stream_key):
    """async_to_sync (a Celery task, a sync view) ends its loop right after the call: the
    flusher writes what waits before the loop goes."""
    store = stores(flush_interval=60)
    ids = [async_to_sync(store.append)(session_id, stream_key, notification(i)) for i in range(3)]
    rows = async_to_sync(orm)(store, lambda: list(stream_rows(session_id, stream_key).values_list("position", flat=True)))
    assert sorted(rows) == sorted(event_id.position for event_id in ids)


# -- one row never costs another (issue 10) ------------------------------------------------------

POISON = b'{"jsonrpc":"2.0","method":"x","params":{"bad":not json}}'


async def row_count(store, session_id):
    return await orm(store, lambda: all_rows().filter(session_id=session_id).count())


@pytest.mark.parametrize("persist_mode", ["batched", "write_through"])
async def test_a_row_the_database_refuses_costs_no_other_row(stores, stream_key, persist_mode):
    """One client's unwritable event shares a batch with other sessions' events: theirs are
    written, the refused one is counted, and a replay after Redis lost both comes from the
    database whole."""
    from mcp_transport.protocol.ids import new_session_id

    store = stores(persist=persist_mode, flush_interval=60)
    victims = [new_session_id() for _ in range(3)]
    attacker = new_session_id()
    appends = [store.append(victim, stream_key, notification(i)) for i in range(4) for victim in victims]
    appends.insert(5, store.append(attacker, stream_key, {"jsonrpc": "2.0"}, data=POISON))
    ids = await asyncio.gather(*appends)
    await store.flush()
    assert await row_count(store, attacker) == 0
    for index, victim in enumerate(victims):
        assert await row_count(store, victim) == 4
        await lose_redis_copy(victim)
        own = [event_id for event_id, (_, owner) in zip(ids, _owners(victims, attacker)) if owner == victim]
        replay = await store.replay_after(victim, own[0])
        assert replay.source == "database" and await ids_of(replay) == own[1:]
    if connection.vendor != "sqlite":  # SQLite's INSERT OR IGNORE skips a failed CHECK silently
        await asyncio.sleep(RedisCounters.DELAY * 4)
        assert int(await async_redis().hget(StoreKeys().shared[0], "events_write_dropped") or 0) == 1


def _owners(victims, attacker):
    """The (index, session) of each append, in the order the test made them."""
    owners = [victim for _ in range(4) for victim in victims]
    owners.insert(5, attacker)
    return list(enumerate(owners))


async def test_rows_are_written_again_after_the_database_failed(stores, session_id, stream_key, monkeypatch):
    """A failure of the database itself (OperationalError) keeps the rows for a retry."""
    from django.db import OperationalError

    from mcp_transport.storage import persist

    store = stores(flush_interval=60)
    insert, failures = persist.insert_rows, []

    def failing_once(rows):
        if not failures:
            failures.append(len(rows))
            raise OperationalError("the database is restarting")
        return insert(rows)

    monkeypatch.setattr(persist, "insert_rows", failing_once)
    ids = await append_many(store, session_id, stream_key, 3)
    await store.flush()
    assert failures == [3] and await row_count(store, session_id) == 0
    assert store._state().flusher.unwritten() == 3
    await store.flush()
    assert await row_count(store, session_id) == 3
    await lose_redis_copy(session_id)
    assert await ids_of(await store.replay_after(session_id, ids[0])) == ids[1:]


# -- no event leaves Redis before its row is written, on a web process too (issue 10) -----------

def database_outage(monkeypatch):
    """Every write of event rows fails as a database that is down does (OperationalError: the
    rows wait for a retry) while ``outage["down"]`` is true."""
    from django.db import OperationalError

    from mcp_transport.storage import persist

    insert, outage = persist.insert_rows, {"down": True}

    def failing(rows):
        if outage["down"]:
            raise OperationalError("the database is down")
        return insert(rows)

    monkeypatch.setattr(persist, "insert_rows", failing)
    return outage


async def test_during_a_database_outage_redis_trims_no_unwritten_event(stores, session_id, stream_key, monkeypatch):
    """A web process's store (no max_unwritten): "keep the Redis copy until its row is safe".
    With a ring's worth of the stream unwritten, its next append waits for the database instead
    of making Redis trim an event no row holds yet; another session's appends do not wait; once
    the database is back, a follower that fell behind reads every event."""
    from mcp_transport.protocol.ids import new_session_id

    outage = database_outage(monkeypatch)
    store, follower = stores(maxlen=5, flush_interval=0.05), stores(maxlen=5)
    first = await append_many(store, session_id, stream_key, 5)
    held = asyncio.ensure_future(store.append(session_id, stream_key, notification(5)))
    other = new_session_id()
    other_ids = await asyncio.wait_for(append_many(store, other, stream_key, 5), 10)  # its own ring's worth
    assert await ids_of(await follower.read_after(other, stream_key, "0-0")) == other_ids
    await asyncio.sleep(0.3)  # the held append had every chance to go on (it must not)
    assert not held.done()
    assert await ids_of(await follower.read_after(session_id, stream_key, "0-0")) == first
    outage["down"] = False
    sixth = await asyncio.wait_for(held, 30)
    later = await append_many(store, session_id, stream_key, 6, start=6)
    await store.flush()
    assert await ids_of(await follower.read_after(session_id, stream_key, first[0].position)) == first[1:] + [sixth] + later
    assert await row_count(store, session_id) == 12


async def test_the_sessions_backlog_counts_across_its_streams(stores, session_id, monkeypatch):
    """SESSION_MAX_EVENTS evicts the session's oldest event, whichever its stream: an append to
    another stream of a session whose backlog is full waits too."""
    database_outage(monkeypatch)
    store = stores(maxlen=100, session_max_events=4, flush_interval=0.05)
    first = await append_many(store, session_id, "a" * 16, 4)
    held = asyncio.ensure_future(store.append(session_id, "b" * 16, notification(9)))
    await asyncio.sleep(0.3)
    assert not held.done()
    assert await ids_of(await store.read_after(session_id, "a" * 16, "0-0")) == first
    held.cancel()


async def test_an_append_waits_for_the_database_only_so_long(stores, session_id, stream_key, monkeypatch):
    """The wait is bounded (unwritten_wait, per stall of the session): then appends go on (the
    rows stay queued and are written once the database is back), counted as an overrun."""
    outage = database_outage(monkeypatch)
    store = stores(maxlen=3, flush_interval=0.05, unwritten_wait=0.5)
    ids = await append_many(store, session_id, stream_key, 3)
    ids += await asyncio.wait_for(append_many(store, session_id, stream_key, 3, start=3), 30)
    await asyncio.sleep(RedisCounters.DELAY * 4)
    assert int(await async_redis().hget(StoreKeys().shared[0], "events_unwritten_overrun") or 0) >= 1
    outage["down"] = False
    await store.flush()
    await store.flush()
    assert await ids_of(await stores().read_after(session_id, stream_key, ids[0].position)) == ids[1:]


async def test_a_replay_waits_for_events_still_in_another_processs_batch(stores, session_id, stream_key):
    """Redis lost the stream while its last events wait in the appending process's batch: a
    replay in another process reads the database again until they are there (issue 10)."""
    writer, reader = stores(flush_interval=0.2), stores(flush_interval=0.2)
    ids = await append_many(writer, session_id, stream_key, 4)
    await lose_redis_copy(session_id)
    after = await append_many(writer, session_id, stream_key, 2, start=4)  # the stream is recreated
    replay = await reader.replay_after(session_id, ids[1])
    assert replay.source == "database" and await ids_of(replay) == ids[2:] + after
    assert await ids_of(await reader.read_after(session_id, stream_key, ids[0].position)) == ids[1:] + after


async def test_a_closed_session_keeps_no_late_event(stores, session_id, stream_key):
    """A DELETE marks the session closed, then deletes its events (here, as another process
    would, behind this store's back); rows still in this store's batch and events appended
    after it are not kept."""
    from mcp_transport.connections import keys

    store = stores(flush_interval=60)
    await append_many(store, session_id, stream_key, 2)  # waiting in the batch
    await async_redis().set(keys().closed(session_id), "deleted")
    await lose_redis_copy(session_id)
    late = await store.append(session_id, stream_key, notification(9), final=True)
    await store.flush()
    assert late.position == "0-0"
    assert await row_count(store, session_id) == 0
    assert await async_redis().xlen(StoreKeys().stream(session_id, stream_key)) == 0


# -- SESSION_MAX_BYTES ---------------------------------------------------------------------

async def kept_bytes(session_id):
    """(bytes the bookkeeping counts, bytes of the messages Redis really holds) for a session,
    and the same per stream."""
    names, client = StoreKeys(), async_redis()
    session_key = names.session_streams(session_id)
    streams = await client.zrange(session_key, 0, -1)
    lengths = names.shared[1]
    real = {key: sum(len(fields.get("m", "").encode()) for _, fields in await client.xrange(key)) for key in streams}
    counted = {key: int(await client.hget(lengths, f"b|{key}") or 0) for key in streams}
    return int(await client.hget(lengths, f"b|{session_key}") or 0), sum(real.values()), counted, real


def sized(i, size=1000):
    return {"jsonrpc": "2.0", "method": "notifications/message", "params": {"i": i, "data": "x" * (size - 60)}}


async def test_a_session_keeps_at_most_session_max_bytes(stores, session_id):
    """A 4 MiB echo over SSE kept 8 MB per session for an hour; now the session's oldest events
    go once its messages pass the byte cap, across its streams, and the bookkeeping is exact."""
    store = stores(session_max_bytes=10_000, maxlen=6)
    streams = ["one", "two"]
    appended = [await store.append(session_id, streams[i % 2], sized(i)) for i in range(30)]
    counted, real, per_stream_counted, per_stream_real = await kept_bytes(session_id)
    assert counted == real and per_stream_counted == per_stream_real
    assert 10_000 - 2 * 1000 < real <= 10_000
    newest = await store.read_after(session_id, "two", "0-0")
    assert newest[-1].id == appended[-1]
    stats = await store.stats()
    assert stats["evicted"]["session_cap"] > 0


async def test_byte_bookkeeping_follows_trims_and_deletes(stores, session_id):
    store = stores(session_max_bytes=None, maxlen=3)
    for i in range(10):
        await store.append(session_id, "s", sized(i, size=100 + i))
    counted, real, _, _ = await kept_bytes(session_id)
    assert counted == real > 0
    await store.delete_session(session_id)
    names = StoreKeys()
    fields = await async_redis().hkeys(names.shared[1])
    assert not [field for field in fields if session_id in field]


async def test_the_backlog_keeps_nothing_of_a_session_once_its_rows_are_written(stores, session_id, stream_key,
                                                                               monkeypatch):
    """What admit() counts per session goes with the session's last unwritten row (no entry per
    session ever seen), and a new stall gets its whole wait again."""
    outage = database_outage(monkeypatch)
    store = stores(maxlen=2, flush_interval=0.05, unwritten_wait=0.3)
    await asyncio.wait_for(append_many(store, session_id, stream_key, 4), 30)  # overran once
    outage["down"] = False
    await store.flush()
    await store.flush()
    flusher = store._state().flusher
    assert not flusher._held and not flusher._waiting_since


async def test_appends_waiting_for_the_backlog_keep_their_order(stores, session_id, stream_key):
    """A sync tool's reports reach the loop one by one and are not awaited (running/worker/context.py:
    up to 100 on their way): appends started while earlier ones wait for the database (the
    stream's backlog is full) must not overtake them, or the stream carries the reports out of
    order."""
    store = stores(maxlen=3, flush_interval=0, max_unwritten=3)
    slow_database(store, 0.01)
    started = []
    for i in range(60):
        started.append(asyncio.ensure_future(store.append(session_id, stream_key, notification(i))))
        await asyncio.sleep(0.001)  # the next report arrives while earlier ones wait
    ids = await asyncio.gather(*started)
    await store.flush()
    events = await stores(maxlen=3).read_after(session_id, stream_key, ids[0].position)
    assert [event.message["params"]["progress"] for event in events] == list(range(1, 60))
    assert not store._state().flusher._queued  # no session's queue outlives its waiting appends
