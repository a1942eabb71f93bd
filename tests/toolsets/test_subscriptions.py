"""``subscribe = True`` (toolsets/subscriptions.py): a row's save and delete notify its URI's
subscribers once the transaction commits, and not at all when it rolls back; a create or a
delete changes ``resources/list`` too. One transaction tells each once, and the process sends
at most one ``list_changed`` per window, without the saving thread waiting for it. What reaches
the clients, across processes, is tests/integration/test_model_subscriptions.py's."""
import asyncio
import threading

import pytest
from channels.db import database_sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction

from tools.library.models import Author, Book
from mcp_transport.methods import notify
from mcp_transport.methods.registry import Registry
from mcp_transport.toolsets import ModelToolset, subscriptions

pytestmark = pytest.mark.django_db(transaction=True)

LISTED = "resources/list_changed"


@pytest.fixture
def sent(monkeypatch):
    """What was sent, in order; ``resources/list_changed`` only once it has gone out (it is not
    waited for), with a window of 0 s between two (their coalescing has tests of its own)."""
    uris = []

    async def resource_updated(uri):
        uris.append(uri)

    async def list_changed(kind):
        uris.append(f"{kind}/list_changed")
    assert subscriptions.flush()  # nothing of an earlier test is pending
    monkeypatch.setattr(notify, "resource_updated", resource_updated)
    monkeypatch.setattr(notify, "list_changed", list_changed)
    monkeypatch.setattr(subscriptions, "LIST_CHANGED_INTERVAL", 0)
    yield uris
    assert subscriptions.flush()


def settled(uris):
    assert subscriptions.flush()
    return uris


def test_a_change_notifies_the_rows_uri_after_the_commit(sent):
    author = Author.objects.create(name="Italo Calvino")
    with transaction.atomic():
        book = Book.objects.create(title="Invisible Cities", author=author)
        assert settled(sent) == []  # not before the commit: a subscriber reading now would not see it
    uri = f"django://library.book/{book.pk}"
    assert settled(sent) == [uri, LISTED]
    book.year = 1972
    book.save()  # each save of autocommit is a transaction of its own
    assert settled(sent) == [uri, LISTED, uri]
    book.delete()
    assert settled(sent) == [uri, LISTED, uri, uri, LISTED]


def test_a_transaction_tells_each_row_and_the_list_once(sent):
    author = Author.objects.create(name="Italo Calvino")
    kept = Book.objects.create(title="Mr Palomar", author=author)
    del settled(sent)[:]
    with transaction.atomic():
        book = Book.objects.create(title="Invisible Cities", author=author)
        for year in range(1970, 1980):
            book.year = year
            book.save()
            kept.year = year
            kept.save()
        gone = Book.objects.create(title="Cosmicomics", author=author)
        gone_pk = gone.pk
        gone.delete()
    uris = [f"django://library.book/{pk}" for pk in (book.pk, kept.pk, gone_pk)]
    assert sorted(settled(sent)) == sorted([*uris, LISTED])  # 23 changes: each row once, the list once
    # The next transaction is told anew.
    with transaction.atomic():
        kept.save()
        kept.save()
    assert settled(sent)[-1] == f"django://library.book/{kept.pk}" and len(sent) == 5


def test_a_savepoint_rolled_back_takes_only_its_own_changes(sent):
    author = Author.objects.create(name="Italo Calvino")
    book = Book.objects.create(title="Invisible Cities", author=author)
    other = Book.objects.create(title="Mr Palomar", author=author)
    del settled(sent)[:]
    with transaction.atomic():
        with pytest.raises(RuntimeError), transaction.atomic():
            book.save()
            other.save()
            raise RuntimeError("rolled back to the savepoint")
        other.save()  # the same URI again, after its first change was rolled back: still told
    assert settled(sent) == [f"django://library.book/{other.pk}"]


def test_redis_away_does_not_fail_a_committed_save(sent, monkeypatch, caplog):
    async def unreachable(*args):
        raise ConnectionError("Redis is away")
    listed = notify.list_changed
    monkeypatch.setattr(notify, "resource_updated", unreachable)
    monkeypatch.setattr(notify, "list_changed", unreachable)
    author = Author.objects.create(name="Italo Calvino")
    book = Book(title="Invisible Cities", author=author)
    book.save()  # autocommit: the callbacks run inside save(); a failure is logged, not raised
    with transaction.atomic():
        book.save()
    assert Book.objects.filter(pk=book.pk).exists()
    assert subscriptions.flush()
    assert "Redis is away" in caplog.text and "list_changed of a row change failed" in caplog.text
    # Redis back: the next create is told (the broadcasts outlive a failed one).
    monkeypatch.setattr(notify, "list_changed", listed)
    Book.objects.create(title="Mr Palomar", author=author)
    assert settled(sent) == [LISTED]


@pytest.fixture
def broadcasts(monkeypatch):
    """The row-driven list broadcasts, each held until the test lets it finish (``go``), with a
    window of an hour after each (a flush ends it); ``rows`` is how many books each broadcast
    would list (read as it starts)."""
    assert subscriptions.flush()
    log = type("Broadcasts", (), {})()
    log.rows, log.started, log.go = [], threading.Event(), threading.Event()

    async def resource_updated(uri):
        pass

    async def list_changed(kind):
        log.rows.append(await database_sync_to_async(Book.objects.count)())
        log.started.set()
        await asyncio.to_thread(log.go.wait)
    monkeypatch.setattr(notify, "resource_updated", resource_updated)
    monkeypatch.setattr(notify, "list_changed", list_changed)
    monkeypatch.setattr(subscriptions, "LIST_CHANGED_INTERVAL", 3600)
    yield log
    log.go.set()
    assert subscriptions.flush()  # and the window ends: the next test's first change is told at once


def test_creates_in_one_window_are_one_broadcast_after_the_first(broadcasts):
    author = Author.objects.create(name="Italo Calvino")
    broadcasts.go.set()
    Book.objects.create(title="Book 0", author=author)
    assert broadcasts.started.wait(30)  # the first change of a quiet spell is told at once
    for number in range(1, 20):  # each in a transaction of its own (autocommit)
        Book.objects.create(title=f"Book {number}", author=author)
    assert broadcasts.rows == [1]  # the window after the first broadcast is not over
    assert subscriptions.flush()  # ends the window, as at the process's exit
    assert broadcasts.rows == [1, 20]  # 20 creates, 2 broadcasts; the last one lists every row


def test_a_save_does_not_wait_for_the_broadcast(broadcasts):
    author = Author.objects.create(name="Italo Calvino")
    Book.objects.create(title="Book 0", author=author)
    assert broadcasts.started.wait(30)
    for number in range(1, 5):  # while the first broadcast cannot finish
        Book.objects.create(title=f"Book {number}", author=author)
    assert not subscriptions.flush(timeout=0.1)  # (only a failing test waits that long)
    broadcasts.go.set()
    assert subscriptions.flush()
    # The creates while it was being sent were told after it, once, with every row.
    assert broadcasts.rows == [1, 5]


def test_a_rolled_back_change_notifies_no_one(sent):
    author = Author.objects.create(name="Italo Calvino")
    with pytest.raises(RuntimeError), transaction.atomic():
        Book.objects.create(title="Invisible Cities", author=author)
        raise RuntimeError("rolled back")
    assert settled(sent) == []


def test_authors_do_not_subscribe(sent):
    Author.objects.create(name="Italo Calvino")
    assert settled(sent) == []


def test_subscribe_needs_resources():
    class Books(ModelToolset):
        model, fields, subscribe = Book, ["id", "title"], True

    with pytest.raises(ImproperlyConfigured, match="subscribe = True needs resources = True"):
        Books().register(Registry())
