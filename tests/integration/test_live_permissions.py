"""Permissions are live (issue 30, classes 5 and 7), on a real daphne with ``MCP_AUTH=on``,
PostgreSQL (the run's DATABASE_URL) and Redis.

Class 5: a subscription re-checks readability when it delivers. A listener (2026-07-28
``subscriptions/listen``) or subscriber (2025-11-25 ``resources/subscribe``) of a public book
whose ``view_book`` permission is taken away (or the group that gave it) hears no more of the
book's saves: at once where the web process checks (2026: the control channel drops every
process's copy of the user's permissions), and within PERMISSION_CACHE_SECONDS where another
process checks (2025: the saving process, which may listen to no control channel).

Class 7: those checks do not queue on Channels' one thread-sensitive thread, so another user's
token validation never waits behind them: with the book's table locked, a listener's check
blocks on the lock, and a new user's first call (its token checked in the database) still
completes. Before, it waited on that one thread until the lock was released."""
import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager

import anyio
import pytest
from mcp_types import ResourceUpdatedNotification

from mcp_transport.conf import DEFAULTS
from mcp_transport.testing import ModernClient

from .test_auth import ROOT, new_token
from .test_toolsets import shell

pytestmark = [pytest.mark.asyncio, pytest.mark.filterwarnings("ignore:The logging capability is deprecated"),
              pytest.mark.filterwarnings("ignore:resources/.*subscribe is removed")]

#: A resource every caller may read: the saver tells it after each save of the book, so that a
#: listener hears the saves go on whether or not it still hears of the book.
MARK = "test://watched-resource"

#: Saves the book, then tells MARK, every 0.1 s until it is stopped.
SAVER = """
import time
from mcp_transport.toolsets import subscriptions
from tools.library.models import Book
for _ in range(1200):
    Book.objects.get(pk={pk}).save()
    subscriptions._send({mark!r})
    time.sleep(0.1)
"""

BOOK = """
import json
from django.contrib.auth.models import Group, Permission
from tools.library.models import Author, Book
author = Author.objects.create(name="{prefix} Author")
group, _ = Group.objects.get_or_create(name="{prefix} readers")
group.permissions.add(Permission.objects.get(content_type__app_label="library", codename="view_book"))
print(json.dumps(Book.objects.create(title="{prefix} public", author=author, year=1990).pk))
"""

#: The user may read books: through its own permission, or its group's.
GRANT = """
from django.contrib.auth.models import Group, Permission, User
user = User.objects.get(username="{username}")
if "{through}" == "group":
    user.groups.add(Group.objects.get(name="{prefix} readers"))
else:
    user.user_permissions.add(Permission.objects.get(content_type__app_label="library", codename="view_book"))
"""

#: ... and no longer may: its permission is removed, or it leaves the group.
REVOKE = """
from django.contrib.auth.models import Group, Permission, User
user = User.objects.get(username="{username}")
if "{through}" == "group":
    user.groups.remove(Group.objects.get(name="{prefix} readers"))
else:
    user.user_permissions.remove(Permission.objects.get(content_type__app_label="library", codename="view_book"))
"""


@pytest.fixture(scope="module")
def library(server_env):
    prefix = f"live{os.getpid()}"
    book = json.loads(shell(server_env, BOOK.format(prefix=prefix)).strip().splitlines()[-1])
    return {"prefix": prefix, "book": book, "uri": f"django://library.book/{book}"}


def reader(server_env, library, name, through):
    """A new user who may read books (``through`` its own permission or its group), and its token."""
    username = f"{library['prefix']}-{name}"
    token = new_token(server_env, username)
    shell(server_env, GRANT.format(username=username, through=through, prefix=library["prefix"]))
    return username, token


@contextmanager
def saving(server_env, pk):
    saver = subprocess.Popen([sys.executable, "manage.py", "shell", "-c", SAVER.format(pk=pk, mark=MARK)], cwd=ROOT,
                             env={**os.environ, **server_env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        yield
    finally:
        saver.kill()
        saver.wait()


class Heard:
    """(monotonic time, URI) of each resources/updated a client hears."""

    def __init__(self):
        self.events = []

    def add(self, uri):
        self.events.append((time.monotonic(), str(uri)))

    async def __call__(self, message):  # a 2025-11-25 client's message_handler
        if isinstance(message, ResourceUpdatedNotification):
            self.add(message.params.uri)

    async def until(self, done, timeout=60):
        with anyio.fail_after(timeout):
            while not done(self.events):
                await anyio.sleep(0.05)

    def after(self, moment):
        return [uri for at, uri in self.events if at > moment]


async def listen_into(client, uris, heard, listening):
    async with client.listen(resource_subscriptions=uris) as changes:
        listening.set()
        async for event in changes:
            heard.add(event.uri)


#: How soon after the permission is gone the updates stop: where the web process checks
#: (2026-07-28), the control channel tells it at once (this bounds the updates already on their
#: way); where the saving process checks (2025-11-25: a shell, which hears no control channel),
#: its copy of the user's permissions is at most PERMISSION_CACHE_SECONDS old.
STOPS_WITHIN = {"auto": 1.5, "legacy": DEFAULTS.get("PERMISSION_CACHE_SECONDS", 5) + 1.5}


@pytest.mark.parametrize("through", ["permission", "group"])
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_subscriber_that_loses_view_book_hears_no_more_of_the_book(connect_as, auth_server, server_env, library,
                                                                          mode, through):
    username, token = await anyio.to_thread.run_sync(reader, server_env, library, f"{mode}-{through}", through)
    heard = Heard()
    uri = library["uri"]
    async with connect_as(token, mode, message_handler=heard) as client, anyio.create_task_group() as tasks:
        if mode == "auto":
            listening = anyio.Event()
            tasks.start_soon(listen_into, client, [uri, MARK], heard, listening)
            await listening.wait()
        else:
            await client.subscribe_resource(uri)
            await client.subscribe_resource(MARK)
        with saving(server_env, library["book"]):
            await heard.until(lambda events: uri in [u for _, u in events])  # it hears of the book
            await anyio.to_thread.run_sync(shell, server_env, REVOKE.format(username=username, through=through,
                                                                           prefix=library["prefix"]))
            cutoff = time.monotonic() + STOPS_WITHIN[mode]
            # The saves go on: three more rounds after the cutoff, each told by its MARK.
            await heard.until(lambda events: [u for at, u in events if at > cutoff].count(MARK) >= 3)
        tasks.cancel_scope.cancel()
    assert uri not in heard.after(cutoff), f"{uri} still heard {heard.after(cutoff).count(uri)} times"
    # resources/read agrees: the book is "not found" to the user now.
    reply = await anyio.to_thread.run_sync(lambda: modern_client(auth_server, token).post("resources/read",
                                                                                           {"uri": uri}))
    assert "error" in reply.json, reply.json


def modern_client(server, token):
    client = ModernClient(server.url)
    client.token = token
    return client


# -- class 7: checks and token validation do not share one thread --------------------------------

@contextmanager
def table_locked(database_url, table):
    """The table locked (ACCESS EXCLUSIVE: even a SELECT waits) until the block ends."""
    import psycopg

    with psycopg.connect(database_url) as connection:
        connection.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
        try:
            yield connection
        finally:
            connection.rollback()


def waiting_on(database_url, table) -> int:
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as connection:
        return connection.execute("SELECT count(*) FROM pg_locks WHERE relation = %s::regclass AND NOT granted",
                                  (table,)).fetchone()[0]


RING = """
from mcp_transport.methods.notify import resource_updated_sync
resource_updated_sync({uri!r})
"""

LISTENS = 4


@pytest.mark.skipif(not os.environ.get("DATABASE_URL", "").startswith("postgres"), reason="needs PostgreSQL's locks")
async def test_a_new_users_token_check_does_not_wait_behind_listeners_readability_checks(connect_as, auth_server,
                                                                                          server_env, library):
    _, attacker = await anyio.to_thread.run_sync(reader, server_env, library, "attacker", "permission")
    victim = await anyio.to_thread.run_sync(new_token, server_env, f"{library['prefix']}-victim")
    database = server_env["DATABASE_URL"]
    async with connect_as(attacker, "auto") as client, anyio.create_task_group() as tasks:
        for _ in range(LISTENS):
            listening = anyio.Event()
            tasks.start_soon(listen_into, client, [library["uri"]], Heard(), listening)
            await listening.wait()
        with table_locked(database, "library_book"):
            # Every listener checks whether it may still read the book: the check's query waits.
            await anyio.to_thread.run_sync(shell, server_env, RING.format(uri=library["uri"]))
            with anyio.fail_after(30):
                while not await anyio.to_thread.run_sync(waiting_on, database, "library_book"):
                    await anyio.sleep(0.05)
            started = time.monotonic()
            # The victim's first request: its token is checked in the database (McpToken, its user).
            try:
                reply = await anyio.to_thread.run_sync(lambda: modern_client(auth_server, victim).post(
                    "tools/call", {"name": "echo", "arguments": {"text": "hi"}}, timeout=15))
            except TimeoutError:
                reply = None
            took = time.monotonic() - started
        tasks.cancel_scope.cancel()
    assert reply is not None, f"the victim's call waited {took:.1f} s behind the listeners' checks, and gave up"
    assert reply.status == 200 and reply.json["result"]["content"][0]["text"] == "hi", reply.body
    print(f"victim's first call behind {LISTENS} blocked checks: {took * 1000:.0f} ms")
