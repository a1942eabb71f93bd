"""The sessions' rows are written off the request path, in batches (state/session_rows.py).

Issue 19: 1,000 sessions opening at once queued on SQLite's one writer (an INSERT at initialize,
an UPDATE at notifications/initialized, each awaited by its request)."""
import asyncio
import threading
import time

import pytest
from asgiref.sync import sync_to_async

from mcp_transport.models import McpSession
from mcp_transport.state import session_rows, sessions

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def writes(monkeypatch):
    """Every transaction of the writer: the list of rows it was handed."""
    seen = []
    write = session_rows._write

    def counting(batch, closing):
        seen.append(list(batch) + [session_rows.Closing(reason, set(ids)) for reason, ids in closing.items()])
        return write(batch, closing)

    monkeypatch.setattr(session_rows, "_write", counting)
    return seen


@pytest.fixture
def held_database():
    """``await hold()`` holds the writer's thread until the returned event is set: what waits for
    the database meanwhile does not finish. Returns (the held call, its release)."""
    releases = []

    async def hold():
        table = session_rows.writer().table
        started, release = threading.Event(), threading.Event()
        releases.append(release)

        def block():
            started.set()
            release.wait(30)

        future = asyncio.ensure_future(table.run(block))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 5)
        return future, release

    yield hold
    for release in releases:
        release.set()


async def taken():
    """Until the writer has taken what waits (the next rows wait together)."""
    while not session_rows.writer()._writing:
        await asyncio.sleep(0.001)


@pytest.fixture(autouse=True)
def _forgotten(monkeypatch):
    """No session of another test counts as used in this process (the ids repeat)."""
    monkeypatch.setattr(session_rows, "_used", session_rows.collections.OrderedDict())


async def opened_and_used(one):
    """A session opened, then used (its first request): its row is handed over then."""
    await sessions.create(one)
    sessions.used(one)


def record(n, state="new"):
    return sessions.SessionRecord(id=f"rows-{n:04}", protocol_version="2025-11-25", state=state,
                                  client_info={"name": f"client-{n}", "version": "1.0"}, principal="p")


def test_sessions_opening_at_once_share_a_transaction_and_wait_for_none(writes, held_database):
    async def scenario():
        blocked, release = await held_database()
        opened = [record(n) for n in range(200)]
        await opened_and_used(opened[0])
        await taken()
        # initialize of every other session, while the database is held: none waits for it (issue 32)
        await asyncio.wait_for(asyncio.gather(*(opened_and_used(one) for one in opened[1:])), 10)
        assert all(session_rows.writer().waiting(one.id) for one in opened)
        release.set()
        await blocked
        await sessions.flush_rows()
        # notifications/initialized of every session, while the database is held: none waits for it
        blocked, release = await held_database()
        await sessions.update(opened[0], state="ready")
        await taken()
        await asyncio.wait_for(asyncio.gather(*(sessions.update(one, state="ready") for one in opened[1:])), 10)
        release.set()
        await blocked
        await sessions.flush_rows()

    asyncio.run(scenario())
    # Four transactions for 400 writes: the first session's row alone (taken at once), the 199
    # others together; the same for their state changes.
    assert [sorted((p.record.id, p.changed) for p in batch) for batch in writes] == [
        [("rows-0000", set())], [(f"rows-{n:04}", set()) for n in range(1, 200)],
        [("rows-0000", {"state"})], [(f"rows-{n:04}", {"state"}) for n in range(1, 200)]]
    rows = McpSession.objects.filter(pk__startswith="rows-")
    assert rows.count() == 200 and set(rows.values_list("state", flat=True)) == {"ready"}
    assert rows.get(pk="rows-0007").client_name == "client-7"


def test_a_lone_session_is_written_at_once_and_its_changes_together(writes):
    async def scenario():
        one = record(1)
        await opened_and_used(one)
        await sessions.flush_rows()
        await sessions.update(one, state="ready")
        await sessions.update(one, log_level="debug")
        await sessions.flush_rows()

    asyncio.run(scenario())
    # The changes came within COMMIT_INTERVAL of the insert's write: one write for both.
    assert [[pending.changed for pending in batch] for batch in writes] == [[set()], [{"state", "log_level"}]]
    row = McpSession.objects.get(pk="rows-0001")
    assert (row.state, row.log_level, row.client_name) == ("ready", "debug", "client-1")


def test_rows_that_keep_coming_are_committed_once_an_interval_with_all_that_came(monkeypatch):
    # Issue 32: a commit per session or two kept SQLite's one writer (and the server's core) busy
    # under 140 sessions a second; the writer now waits COMMIT_INTERVAL between commits.
    monkeypatch.setattr(session_rows, "COMMIT_INTERVAL", 0.05)
    started, hand_over = [], session_rows.RowWriter._write_waiting

    async def timed(writer):
        # When the loop hands a batch over (the interval is kept from there): the writer's thread
        # may start a batch late on a busy machine, which shortens the gap to the next one.
        started.append((asyncio.get_running_loop().time(), len(writer._pending)))
        return await hand_over(writer)

    monkeypatch.setattr(session_rows.RowWriter, "_write_waiting", timed)

    async def scenario():
        for n in range(60):
            await opened_and_used(record(n))
            await asyncio.sleep(0.004)
        await sessions.flush_rows()

    asyncio.run(scenario())
    assert started[0][1] == 1  # the first row went at once
    assert sum(size for _, size in started) == 60
    gaps = [later - earlier for (earlier, _), (later, _) in zip(started, started[1:])]
    assert gaps and min(gaps) >= 0.05 * 0.9, gaps  # asyncio may wake a clock tick early
    assert McpSession.objects.filter(pk__startswith="rows-").count() == 60


def test_a_change_written_before_its_insert_by_another_process_is_kept():
    # Process B heard notifications/initialized before process A's insert landed.
    session_rows.write_batch([session_rows.Pending(record(2, state="ready"), {"state"})])
    session_rows.write_batch([session_rows.Pending(record(2, state="initializing"))])
    assert McpSession.objects.get(pk="rows-0002").state == "ready"


def test_a_change_that_raced_the_close_does_not_reopen_the_row():
    session_rows.write_batch([session_rows.Pending(record(3, state="ready"))])
    asyncio.run(sessions.close("rows-0003", "terminated"))
    session_rows.write_batch([session_rows.Pending(record(3, state="ready"), {"state", "log_level"})])
    row = McpSession.objects.get(pk="rows-0003")
    assert (row.state, row.closed_reason) == ("closed", "terminated")


def test_a_closed_session_whose_row_still_waited_is_closed_in_the_database(held_database):
    async def scenario():
        one = record(4)
        await opened_and_used(one)
        blocked, release = await held_database()
        await sessions.update(one, state="ready")  # its row waits behind the held write
        release.set()
        await blocked
        await sessions.close(one.id, "terminated")

    asyncio.run(scenario())
    assert McpSession.objects.get(pk="rows-0004").state == "closed"


def test_a_session_redis_lost_before_its_change_was_written_is_refilled_from_it(held_database):
    async def scenario():
        one = record(5)
        await opened_and_used(one)
        blocked, release = await held_database()
        await sessions.update(one, state="ready")
        from mcp_transport.connections import async_redis, keys

        await async_redis().delete(keys().session(one.id))  # a Redis restart
        loading = asyncio.ensure_future(sessions.load(one.id))
        await asyncio.sleep(0)
        release.set()
        await blocked
        return await loading

    loaded = asyncio.run(scenario())
    assert loaded is not None and loaded.state == "ready"


def test_a_row_the_database_refuses_costs_only_itself():
    bad = record(6)
    bad.user_id = 10 ** 9  # no such user: the foreign key refuses it
    session_rows.write_batch([session_rows.Pending(record(7)), session_rows.Pending(bad),
                              session_rows.Pending(record(8))])
    assert set(McpSession.objects.filter(pk__startswith="rows-").values_list("pk", flat=True)) == {
        "rows-0007", "rows-0008"}


def test_sessions_closing_at_once_share_one_update(writes, held_database):
    opened = [record(n, state="ready") for n in range(100)]
    session_rows.write_batch([session_rows.Pending(one) for one in opened])

    async def scenario():
        blocked, release = await held_database()
        first = asyncio.ensure_future(sessions.close(opened[0].id, "terminated"))
        await taken()
        others = asyncio.gather(*(sessions.close(one.id, "terminated") for one in opened[1:]))
        await asyncio.sleep(0.2)
        release.set()
        await asyncio.gather(blocked, first, others)

    asyncio.run(scenario())
    assert len(writes[0]) == 100  # the rows, written before
    assert [[(c.reason, len(c.session_ids)) for c in batch] for batch in writes[1:]] == [
        [("terminated", 1)], [("terminated", 99)]]
    rows = McpSession.objects.filter(pk__startswith="rows-")
    assert set(rows.values_list("state", "closed_reason")) == {("closed", "terminated")}


def test_the_clients_name_reaches_the_row_with_its_change(writes):
    # stdio and HTTP+SSE learn the client at initialize, after the session was created: the change
    # of client_info carries the name and version columns (no separate write on the request path).
    async def scenario():
        one = sessions.SessionRecord(id="rows-0009", protocol_version="2025-11-25", principal="p")
        await opened_and_used(one)
        await sessions.update(one, client_info={"name": "late-client", "version": "2.0"})
        await sessions.flush_rows()

    asyncio.run(scenario())
    row = McpSession.objects.get(pk="rows-0009")
    assert (row.client_name, row.client_version) == ("late-client", "2.0")


def test_each_closed_session_is_observed_once_with_how_long_it_lasted():
    from datetime import timedelta

    from django.utils import timezone

    from mcp_transport.state import histograms

    histograms.take()  # nothing from another test of this process
    session_rows.write_batch([session_rows.Pending(record(n, state="ready")) for n in (10, 11, 12)])
    began = timezone.now() - timedelta(seconds=90)
    McpSession.objects.filter(pk__in=["rows-0010", "rows-0011"]).update(created_at=began)
    # Another process closed rows-0012 first: its close, not this one, observes it.
    session_rows.write_batch([], {"deleted": {"rows-0012"}})
    assert sum(histograms.take()[("session", ())][:15]) == 1
    session_rows.write_batch([], {"deleted": {"rows-0010", "rows-0011", "rows-0012"}})
    session_rows.write_batch([], {"terminated": {"rows-0010"}})  # closed already: not again
    counts = histograms.take()[("session", ())]
    assert counts[:15] == [0] * 12 + [2, 0, 0]  # 90 s: in the 120 s bucket, twice
    assert 180 <= counts[15] / 1_000_000 < 200


def test_an_expired_session_lasted_until_its_idle_timeout_ran_out_not_until_the_cleanup():
    from datetime import timedelta

    from django.utils import timezone

    from mcp_transport.conf import get_config
    from mcp_transport.state import histograms

    histograms.take()
    now, idle = timezone.now(), get_config()["SESSION_IDLE_TIMEOUT"]
    row = record(13, state="ready")
    session_rows.write_batch([session_rows.Pending(row)])
    McpSession.objects.filter(pk=row.id).update(created_at=now - timedelta(seconds=idle + 3600),
                                                last_seen_at=now - timedelta(seconds=idle + 3000))
    session_rows.write_batch([], {"expired": {row.id}})
    counts = histograms.take()[("session", ())]
    # Its last request 600 s after it began, then SESSION_IDLE_TIMEOUT without one; the cleanup
    # that closed it came 3,000 s after that.
    assert counts[15] / 1_000_000 == pytest.approx(600 + idle, abs=1)
    assert counts[:15] == [0] * 14 + [1]


def test_a_session_that_did_nothing_leaves_no_row_one_that_did_gets_its_row_once(writes):
    """Issue 38: each anonymous open-and-DELETE left a closed row, kept 7 days
    (CLOSED_SESSION_RETENTION). A session has a row once it did something, handed over once per
    process, its created_at the moment it opened."""
    idle, busy = record(20), record(21)

    async def scenario():
        await sessions.create(idle)
        await sessions.update(idle, state="ready")  # notifications/initialized: changes a row only if there
        await sessions.close(idle.id, "deleted")
        await sessions.create(busy)
        busy.created -= 3600  # it opened an hour before its first request
        for _ in range(3):  # its requests: a dict lookup after the first
            sessions.used(busy)
        await sessions.flush_rows()

    asyncio.run(scenario())
    assert not McpSession.objects.filter(pk=idle.id).exists()
    assert [pending.record.id for batch in writes for pending in batch if hasattr(pending, "record")].count(
        busy.id) == 1
    row = McpSession.objects.get(pk=busy.id)
    assert time.time() - row.created_at.timestamp() == pytest.approx(3600, abs=60)


def test_a_session_whose_row_was_lost_gets_it_when_next_used(monkeypatch):
    """Issue 38: kill -9 of daphne before its writer wrote 25 of 100 new sessions' rows; after a
    restart they worked but never got their row."""
    lost = record(22, state="ready")

    async def scenario():
        await sessions.create(lost)
        sessions.used(lost)  # its row waits in a process that is killed now:
        session_rows.writer()._pending.clear()
        monkeypatch.setattr(session_rows, "_used", session_rows.collections.OrderedDict())  # the next process
        await sessions.update(lost, log_level="debug")  # before its next use: no row made of it
        await sessions.flush_rows()
        assert not await sync_to_async(McpSession.objects.filter(pk=lost.id).exists)()
        sessions.used(lost)
        await sessions.flush_rows()

    asyncio.run(scenario())
    row = McpSession.objects.get(pk=lost.id)
    assert (row.state, row.log_level) == ("ready", "debug")
