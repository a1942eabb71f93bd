"""Subscriptions to model rows (issue 22) on a real daphne with ``MCP_AUTH=on``: the official SDK
client, in both eras, subscribes to ``django://library.book/{pk}`` and hears of the row's saves
made by another process (a management shell, as a Celery worker or a cron job would); a user
who may not read a row can neither subscribe to it nor learn of its changes."""
import json
import os
import subprocess
import sys
from contextlib import contextmanager

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourcesListChanged
from mcp_types import ResourceUpdatedNotification

from .test_auth import ROOT, new_token
from .test_toolsets import SHELF, shell

pytestmark = [pytest.mark.asyncio, pytest.mark.filterwarnings("ignore:The logging capability is deprecated"),
              pytest.mark.filterwarnings("ignore:resources/.*subscribe is removed")]

#: Saves the rows it is given, in that order, every 0.1 s until it is stopped: whichever moment
#: the client's stream goes live, a save follows it (a GET stream replays nothing older).
SAVER = """
import time
from tools.library.models import Book
for _ in range(1200):
    for pk in {pks!r}:
        Book.objects.get(pk=pk).save()
    time.sleep(0.1)
"""


@pytest.fixture(scope="module")
def shelf(server_env):
    prefix = f"subs{os.getpid()}"
    rows = json.loads(shell(server_env, f"import json\nprefix = {prefix!r}\n{SHELF}").strip().splitlines()[-1])
    tokens = {name: new_token(server_env, f"{prefix}-{name}") for name in ("reader", "writer")}
    # A private book of the writer's per era, that the writer gives away once subscribed to it.
    rows.update(json.loads(shell(server_env, HANDED.format(prefix=prefix)).strip().splitlines()[-1]))
    uris = {key: f"django://library.book/{rows[key]}" for key in ("public", "private", "handed_legacy", "handed_auto")}
    return {"tokens": tokens, "uris": uris, "prefix": prefix, **rows}


HANDED = """
import json
from tools.library.models import Book
writer = Book.objects.get(title="{prefix} private").owner
print(json.dumps({{f"handed_{{mode}}": Book.objects.create(title=f"{prefix} handed {{mode}}", author_id=Book.objects.get(
    title="{prefix} private").author_id, owner=writer, public=False).pk for mode in ("legacy", "auto")}}))
"""

#: The book goes to the reader: the writer may no longer read it.
GIVE_AWAY = """
from django.contrib.auth.models import User
from tools.library.models import Book
book = Book.objects.get(pk={pk})
book.owner = User.objects.get(username="{prefix}-reader")
book.save()
"""


def give_away(server_env, shelf, key):
    shell(server_env, GIVE_AWAY.format(pk=shelf[key], prefix=shelf["prefix"]))


@contextmanager
def saving(server_env, *pks):
    """Another process saves the books ``pks`` again and again while the block runs."""
    saver = subprocess.Popen([sys.executable, "manage.py", "shell", "-c", SAVER.format(pks=list(pks))], cwd=ROOT,
                             env={**os.environ, **server_env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        yield
    finally:
        saver.kill()
        saver.wait()



class Updates:
    """The URIs of the notifications/resources/updated a 2025-11-25 client receives."""

    def __init__(self):
        self.uris = []
        self.arrived = anyio.Event()

    async def __call__(self, message):
        if isinstance(message, ResourceUpdatedNotification):
            self.uris.append(str(message.params.uri))
            self.arrived.set()

    async def until(self, uri):
        with anyio.fail_after(60):
            while uri not in self.uris:
                self.arrived = anyio.Event()
                await self.arrived.wait()
        return self.uris


async def test_2025_a_subscriber_hears_of_its_rows_saves_made_by_another_process(connect_as, server_env, shelf):
    updates = Updates()
    async with connect_as(shelf["tokens"]["writer"], "legacy", message_handler=updates) as writer:
        await writer.subscribe_resource(shelf["uris"]["private"])
        with saving(server_env, shelf["private"]):
            await updates.until(shelf["uris"]["private"])


async def test_2025_a_reader_can_neither_subscribe_to_nor_hear_of_a_row_it_may_not_read(connect_as, server_env,
                                                                                          shelf):
    updates = Updates()
    async with connect_as(shelf["tokens"]["reader"], "legacy", message_handler=updates) as reader:
        with pytest.raises(MCPError) as refused:
            await reader.subscribe_resource(shelf["uris"]["private"])
        assert refused.value.error.code == -32002  # as resources/read answers it: "Resource not found"
        with pytest.raises(MCPError) as unknown:
            await reader.subscribe_resource("django://library.book/nonexistent")
        assert unknown.value.error.code == -32002
        await reader.subscribe_resource(shelf["uris"]["public"])
        # The private row is saved before the public one, each round: had it been sent, it came first.
        with saving(server_env, shelf["private"], shelf["public"]):
            heard = await updates.until(shelf["uris"]["public"])
    assert set(heard) == {shelf["uris"]["public"]}


async def next_change(client, uri):
    """Listen (2026-07-28) to one row until it changes."""
    async with client.listen(resource_subscriptions=[uri]) as changes:
        async for event in changes:
            return event.uri


async def test_2026_a_listener_hears_of_its_rows_saves_made_by_another_process(connect_as, server_env, shelf):
    async with connect_as(shelf["tokens"]["writer"], "auto") as writer:
        with saving(server_env, shelf["private"]), anyio.fail_after(60):
            assert await next_change(writer, shelf["uris"]["private"]) == shelf["uris"]["private"]


async def test_2026_a_reader_can_neither_listen_to_nor_hear_of_a_row_it_may_not_read(connect_as, server_env, shelf):
    async with connect_as(shelf["tokens"]["reader"], "auto") as reader:
        with pytest.raises(MCPError) as refused:
            async with reader.listen(resource_subscriptions=[shelf["uris"]["public"], shelf["uris"]["private"]]):
                pass
        # As resources/read answers it in 2026-07-28 ("MUST NOT emit -32002").
        assert refused.value.error.code == -32602 and "not found" in refused.value.error.message
        with saving(server_env, shelf["private"], shelf["public"]), anyio.fail_after(60):
            assert await next_change(reader, shelf["uris"]["public"]) == shelf["uris"]["public"]


async def test_2025_a_row_given_away_is_no_longer_told_of_to_its_old_reader(connect_as, server_env, shelf):
    updates = Updates()
    async with connect_as(shelf["tokens"]["writer"], "legacy", message_handler=updates) as writer:
        await writer.subscribe_resource(shelf["uris"]["handed_legacy"])  # its own, then
        await writer.subscribe_resource(shelf["uris"]["public"])
        await anyio.to_thread.run_sync(give_away, server_env, shelf, "handed_legacy")
        with saving(server_env, shelf["handed_legacy"], shelf["public"]):
            heard = await updates.until(shelf["uris"]["public"])
    assert set(heard) == {shelf["uris"]["public"]}


async def test_2026_a_row_given_away_is_no_longer_told_of_to_its_old_listener(connect_as, server_env, shelf):
    async with connect_as(shelf["tokens"]["writer"], "auto") as writer:
        async with writer.listen(resource_subscriptions=[shelf["uris"]["handed_auto"], shelf["uris"]["public"]]) \
                as changes:
            await anyio.to_thread.run_sync(give_away, server_env, shelf, "handed_auto")
            with saving(server_env, shelf["handed_auto"], shelf["public"]), anyio.fail_after(60):
                event = await anext(changes)
    assert event.uri == shelf["uris"]["public"]


async def test_2026_a_tools_write_in_the_web_process_notifies_too(connect_as, shelf):
    async with connect_as(shelf["tokens"]["writer"], "auto") as writer:
        async with writer.listen(resource_subscriptions=[shelf["uris"]["public"]]) as changes:
            updated = await writer.call_tool("book_update", {"id": shelf["public"], "year": 1993})
            assert updated.is_error is not True, updated.content
            with anyio.fail_after(60):
                event = await anext(changes)
    assert event.uri == shelf["uris"]["public"]


#: Each round: one transaction saves the first book five times, then another saves the second
#: once (the marker between rounds), every 0.1 s until it is stopped.
ROUNDS = """
import time
from django.db import transaction
from tools.library.models import Book
for _ in range(1200):
    with transaction.atomic():
        for _ in range(5):
            Book.objects.get(pk={pk}).save()
    Book.objects.get(pk={marker}).save()
    time.sleep(0.1)
"""


@contextmanager
def saving_rounds(server_env, pk, marker):
    saver = subprocess.Popen([sys.executable, "manage.py", "shell", "-c", ROUNDS.format(pk=pk, marker=marker)],
                             cwd=ROOT, env={**os.environ, **server_env}, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    try:
        yield
    finally:
        saver.kill()
        saver.wait()


def per_round(heard, uri, marker):
    """How often ``uri`` was heard between each two markers (whole rounds only)."""
    marks = [i for i, seen in enumerate(heard) if seen == marker]
    return [heard[start + 1:end].count(uri) for start, end in zip(marks, marks[1:])]


async def test_2025_five_saves_in_one_transaction_are_one_notification(connect_as, server_env, shelf):
    updates = Updates()
    uri, marker = shelf["uris"]["private"], shelf["uris"]["public"]
    async with connect_as(shelf["tokens"]["writer"], "legacy", message_handler=updates) as writer:
        await writer.subscribe_resource(uri)
        await writer.subscribe_resource(marker)
        with saving_rounds(server_env, shelf["private"], shelf["public"]), anyio.fail_after(60):
            while len(per_round(updates.uris, uri, marker)) < 3:
                await anyio.sleep(0.05)
    assert set(per_round(updates.uris, uri, marker)) == {1}


async def test_2026_five_saves_in_one_transaction_are_one_notification(connect_as, server_env, shelf):
    uri, marker = shelf["uris"]["private"], shelf["uris"]["public"]
    heard = []
    async with connect_as(shelf["tokens"]["writer"], "auto") as writer:
        async with writer.listen(resource_subscriptions=[uri, marker]) as changes:
            with saving_rounds(server_env, shelf["private"], shelf["public"]), anyio.fail_after(60):
                while len(per_round(heard, uri, marker)) < 3:
                    heard.append((await anext(changes)).uri)
    assert set(per_round(heard, uri, marker)) == {1}


#: A cron job's shape: it creates a row (told at once), and once the listener heard of it, saves
#: the marker, deletes the row and exits at once, inside the window after the first broadcast.
CREATE_AND_EXIT = """
import sys
from mcp_transport.toolsets import subscriptions
from tools.library.models import Book
subscriptions.LIST_CHANGED_INTERVAL = 3600  # the delete's list_changed waits for the window's end
marker = Book.objects.get(pk={marker})
row = Book.objects.create(title="{prefix} listed", author_id=marker.author_id, owner=marker.owner)
sys.stdin.readline()
marker.save()
row.delete()
"""


async def test_2026_a_process_that_exits_in_the_window_still_tells_its_last_change(connect_as, server_env, shelf):
    """Row-driven resources/list_changed are coalesced (one per LIST_CHANGED_INTERVAL per
    process) and not waited for by the save: the one for the delete, pending when the process
    exits, goes out before it does (its window is cut short)."""
    marker = shelf["uris"]["public"]
    code = CREATE_AND_EXIT.format(marker=shelf["public"], prefix=shelf["prefix"])
    async with connect_as(shelf["tokens"]["writer"], "auto") as writer:
        async with writer.listen(resources_list_changed=True, resource_subscriptions=[marker]) as changes, \
                await anyio.open_process([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT,
                                         env={**os.environ, **server_env}, stdout=subprocess.DEVNULL) as cron:
            with anyio.fail_after(60):
                # Taken before the next arrives: the SDK folds an event into an equal one still queued.
                assert isinstance(await anext(changes), ResourcesListChanged)  # the create's
                await cron.stdin.send(b"go\n")
                assert (await anext(changes)).uri == marker
                assert isinstance(await anext(changes), ResourcesListChanged)  # the delete's
                assert await cron.wait() == 0
