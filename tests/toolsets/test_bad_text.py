"""Issue 30, class 6, in process (LocalClient: no JSON text, so a lone surrogate reaches the
tools/call as it would from another tool): a toolset's tools refuse text no database stores
with -32602 before any query; a resource URI's key holding it is a row that does not exist;
tools of other kinds take any text."""
import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.test.utils import CaptureQueriesContext

from mcp_transport.protocol.errors import ProtocolError
from tools.library.models import Author, Book

from .test_model_toolset import call, client_of, user_with

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def clerk():
    user = user_with("clerk", "view_book", "add_book", "change_book", "view_author", "add_author")
    author = Author.objects.create(name="Ursula K. Le Guin")
    book = Book.objects.create(title="The Dispossessed", author=author, year=1974, owner=user)
    return client_of(user), author, book


@pytest.mark.parametrize("tool, arguments, named", [
    ("book_list", {"search": "\ud800"}, "search"),
    ("book_list", {"genre__in": ["novel", "\x00"]}, "genre__in[1]"),
    ("book_list", {"title__icontains": "\udfff"}, "title__icontains"),
    ("book_create", {"title": "\ud83d", "author": 1}, "title"),
    ("author_create", {"name": "a\x00"}, "name"),
    ("author_list", {"search": "\udc00"}, "search"),
    ("shelf_list", {"search": "\ud800"}, "search"),
])
def test_text_no_database_stores_is_invalid_params_before_any_query(clerk, tool, arguments, named):
    client = clerk[0]
    with CaptureQueriesContext(connection) as queries, pytest.raises(ProtocolError) as refused:
        call(client, tool, **arguments)
    assert refused.value.code == -32602
    assert str(refused.value).startswith(f"Invalid arguments for tool {tool}: {named} holds a ")
    assert not [query for query in queries if "library_" in query["sql"]]


def test_a_resource_key_holding_it_is_not_found(clerk):
    with pytest.raises(ProtocolError) as missing:
        async_to_sync(clerk[0].read_resource)("django://library.book/\x00")
    assert missing.value.code == -32002


def test_other_tools_take_any_text(clerk):
    assert call(clerk[0], "echo", text="a\x00b").text == "a\x00b"
