"""``subscribe = True`` (toolsets/subscriptions.py): a row's save and delete notify its URI's
subscribers once the transaction commits, and not at all when it rolls back. What reaches the
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
    monkeypatch.setattr(notify, "resource_updated", resource_updated)
    return uris


def test_a_change_notifies_the_rows_uri_after_the_commit(sent):
    author = Author.objects.create(name="Italo Calvino")
    with transaction.atomic():
        book = Book.objects.create(title="Invisible Cities", author=author)
        assert sent == []  # not before the commit: a subscriber reading now would not see it
    uri = f"django://library.book/{book.pk}"
    assert sent == [uri]
    book.year = 1972
    book.save()
    book.delete()
    assert sent == [uri, uri, uri]


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
