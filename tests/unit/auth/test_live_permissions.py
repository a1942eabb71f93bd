"""Permissions are live (issue 30, classes 5 and 7): what a subscription asks before it delivers
(notify.may_read), where that runs, what it costs, and what drops a process's copy of a user
(auth/permissions.py). What reaches clients on a real daphne is
tests/integration/test_live_permissions.py's."""
import asyncio
import json
import threading

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.db import connections

from mcp_transport import auth
from mcp_transport.auth import permissions, users
from mcp_transport.eras.modern_2026 import listen
from mcp_transport.methods import notify
from tools.library.models import Author, Book

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def told(monkeypatch):
    """The ``permissions_changed`` control messages published, as (kind, name)."""
    messages = []
    monkeypatch.setattr(permissions, "publish",
                        lambda pipe, channel, message: messages.append((json.loads(message)["kind"],
                                                                         json.loads(message)["s"])))
    users.forget()
    return messages


def view_book():
    return Permission.objects.get(content_type__app_label="library", codename="view_book")


def book_uri():
    book = Book.objects.create(title="Live", author=Author.objects.create(name="A"), year=1990)
    return f"django://library.book/{book.pk}"


def cached(user) -> bool:
    return user.pk in users._users.entries


def test_a_permission_or_group_taken_away_drops_the_user_here_and_tells_every_process(told):
    user = User.objects.create(username="live-1")
    user.user_permissions.add(view_book())
    group = Group.objects.create(name="live readers")
    user.groups.add(group)
    told.clear()

    def load():
        return asyncio.run(auth.load_user(user.pk, max_age=5))

    assert load().has_perm("library.view_book") and cached(user)
    user.user_permissions.remove(view_book())
    assert not cached(user) and told == [("permissions_changed", str(user.pk))]
    assert not load().has_perm("library.view_book")

    load()
    told.clear()
    user.groups.remove(group)  # from the user's side: the user
    group.user_set.add(user)  # from the group's: the users named
    assert not cached(user) and told == [("permissions_changed", str(user.pk))] * 2
    told.clear()
    load()
    group.permissions.add(view_book())  # a group's permissions: its members are not looked up
    assert not cached(user) and told == [("permissions_changed", "*")]

    told.clear()
    load()
    user.last_login = user.date_joined
    user.save(update_fields=["last_login"])  # every login: changes nothing a check reads
    assert cached(user) and told == []
    user.is_active = False
    user.save()
    assert not cached(user) and told == [("permissions_changed", str(user.pk))]
    assert not load().is_authenticated


def test_a_control_message_drops_the_named_user_or_everyone():
    users.forget()
    first, second = (User.objects.create(username=f"live-heard-{n}") for n in (1, 2))
    for user in (first, second):
        asyncio.run(auth.load_user(user.pk))
    permissions.heard(str(first.pk))
    assert not cached(first) and cached(second)
    permissions.heard(permissions.EVERYONE)
    assert not cached(second)


def test_a_load_that_began_before_a_change_keeps_nothing(monkeypatch):
    users.forget()
    user = User.objects.create(username="live-race")
    fetch = users._fetch_user

    def fetch_then_change(user_id):
        found = fetch(user_id)
        users.forget([user_id])  # heard while the load's query ran: what it read may be old
        return found

    monkeypatch.setattr(users, "_fetch_user", fetch_then_change)
    asyncio.run(auth.load_user(user.pk))
    assert not cached(user)


def test_the_checks_run_in_their_lanes_and_callers_of_one_user_share_a_load(told, monkeypatch):
    """The row check in a HANDLERS lane thread, the user's load in an auth thread: neither on
    Channels' one thread-sensitive thread, which everyone's token checks would wait behind."""
    user = User.objects.create(username="live-threads")
    user.user_permissions.add(view_book())
    uri = book_uri()
    threads, loads, used = [], [], set()
    readable, fetch = notify._readable, users._fetch_user

    def recorded(*args):
        threads.append(threading.current_thread().name)
        used.add(connections["default"])
        return readable(*args)
    monkeypatch.setattr(notify, "_readable", recorded)
    monkeypatch.setattr(users, "_fetch_user", lambda pk: (loads.append(threading.current_thread().name),
                                                          fetch(pk))[1])

    async def scenario():
        return await asyncio.gather(*(notify.may_read(uri, user.pk) for _ in range(16)))

    assert asyncio.run(scenario()) == [True] * 16
    assert len(loads) == 1 and loads[0].startswith("mcp-auth")  # one load for sixteen callers
    assert len(threads) == 16 and all(name.startswith("mcp-handlers") for name in threads)

    user.user_permissions.remove(view_book())
    threads.clear()
    assert asyncio.run(notify.may_read(uri, user.pk)) is False
    assert threads == []  # refused on the permission: no row check
    for wrapper in used:  # the suite's sync code keeps connections (tests/conftest.py): not past this test
        wrapper.inc_thread_sharing()
        wrapper.close()
        wrapper.dec_thread_sharing()


def test_listens_of_one_user_that_hear_one_change_share_one_check(monkeypatch):
    asked = []

    async def may_read(uri, user, call=None):
        asked.append(uri)
        await asyncio.sleep(0.01)
        return True

    monkeypatch.setattr(notify, "may_read", may_read)

    class Call:
        principal = auth.Principal.for_user(User(pk=7))

    message = {"method": "notifications/resources/updated", "params": {"uri": "django://library.book/1"}}

    async def scenario():
        heard = json.dumps(message)
        first = await asyncio.gather(*(listen._may_hear(message, heard, Call()) for _ in range(32)))
        again = json.dumps(message)  # the next change: the same text, another message
        second = await asyncio.gather(*(listen._may_hear(message, again, Call()) for _ in range(32)))
        return first + second

    assert asyncio.run(scenario()) == [True] * 64
    assert len(asked) == 2
