"""``subscribe = True`` (toolsets/subscriptions.py): a row's save and delete notify its URI's
subscribers once the transaction commits, and not at all when it rolls back; a create or a
delete changes ``resources/list`` too. One transaction tells each once. What reaches the
clients, across processes, is tests/integration/test_model_subscriptions.py's."""
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction

from tools.library.models import Author, Book
from mcp_transport.methods import notify
from mcp_transport.methods.registry import Registry
from mcp_transport.toolsets import ModelToolset

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sent(monkeypatch):
    uris = []

    async def resource_updated(uri):
        uris.append(uri)

    async def list_changed(kind):
        uris.append(f"{kind}/list_changed")
    monkeypatch.setattr(notify, "resource_updated", resource_updated)
    monkeypatch.setattr(notify, "list_changed", list_changed)
    return uris


LISTED = "resources/list_changed"


def test_a_change_notifies_the_rows_uri_after_the_commit(sent):
    author = Author.objects.create(name="Italo Calvino")
    with transaction.atomic():
        book = Book.objects.create(title="Invisible Cities", author=author)
        assert sent == []  # not before the commit: a subscriber reading now would not see it
    uri = f"django://library.book/{book.pk}"
    assert sent == [uri, LISTED]
    book.year = 1972
    book.save()  # each save of autocommit is a transaction of its own
    book.delete()
    assert sent == [uri, LISTED, uri, uri, LISTED]


def test_a_transaction_tells_each_row_and_the_list_once(sent):
    author = Author.objects.create(name="Italo Calvino")
    kept = Book.objects.create(title="Mr Palomar", author=author)
    del sent[:]
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
    assert sorted(sent) == sorted([*uris, LISTED])  # 23 changes: each row once, the list once
    # The next transaction is told anew.
    with transaction.atomic():
        kept.save()
        kept.save()
    assert sent[-1] == f"django://library.book/{kept.pk}" and len(sent) == 5


def test_a_savepoint_rolled_back_takes_only_its_own_changes(sent):
    author = Author.objects.create(name="Italo Calvino")
    book = Book.objects.create(title="Invisible Cities", author=author)
    other = Book.objects.create(title="Mr Palomar", author=author)
    del sent[:]
    with transaction.atomic():
        with pytest.raises(RuntimeError), transaction.atomic():
            book.save()
            other.save()
            raise RuntimeError("rolled back to the savepoint")
        other.save()  # the same URI again, after its first change was rolled back: still told
    assert sent == [f"django://library.book/{other.pk}"]


def test_redis_away_does_not_fail_a_committed_save(monkeypatch, caplog):
    async def unreachable(*args):
        raise ConnectionError("Redis is away")
    monkeypatch.setattr(notify, "resource_updated", unreachable)
    monkeypatch.setattr(notify, "list_changed", unreachable)
    author = Author.objects.create(name="Italo Calvino")
    book = Book(title="Invisible Cities", author=author)
    book.save()  # autocommit: the callbacks run inside save(); a failure is logged, not raised
    with transaction.atomic():
        book.save()
    assert Book.objects.filter(pk=book.pk).exists()
    assert "Redis is away" in caplog.text


def test_a_rolled_back_change_notifies_no_one(sent):
    author = Author.objects.create(name="Italo Calvino")
    with pytest.raises(RuntimeError), transaction.atomic():
        Book.objects.create(title="Invisible Cities", author=author)
        raise RuntimeError("rolled back")
    assert sent == []


def test_authors_do_not_subscribe(sent):
    Author.objects.create(name="Italo Calvino")
    assert sent == []


def test_subscribe_needs_resources():
    class Books(ModelToolset):
        model, fields, subscribe = Book, ["id", "title"], True

    with pytest.raises(ImproperlyConfigured, match="subscribe = True needs resources = True"):
        Books().register(Registry())
