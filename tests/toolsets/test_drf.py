"""A DRF viewset as tools (toolsets/drf.py) on the example library's ShelfViewSet
(tools/library/api.py), through the server's own dispatch (LocalClient): the viewset's
permission classes, throttle, filter backends, pagination and serializers decide every call.
The SDK client over HTTP, in both eras, is tests/integration/test_toolsets_drf.py's."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured

from mcp_transport.methods.registry import Registry
from mcp_transport.protocol.errors import ProtocolError
from mcp_transport.toolsets import register_viewset
from tools.library.models import Author, Book

from .test_model_toolset import call, client_of, names, result, user_with

pytestmark = pytest.mark.django_db(transaction=True)

SHELF_TOOLS = {"shelf_list", "shelf_get", "shelf_create", "shelf_update", "shelf_delete", "shelf_publish"}
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _fresh_throttles():
    """The throttle counts per user id, in the cache: a test database's ids start again at 1."""
    cache.delete_many([f"throttle_user_{pk}" for pk in range(1, 200)])


@pytest.fixture
def shelf():
    ann = user_with("ann", "view_book", "add_book", "change_book", "delete_book")
    bob = user_with("bob", "view_book")
    le_guin = Author.objects.create(name="Ursula K. Le Guin")
    borges = Author.objects.create(name="Jorge Luis Borges")
    books = {
        "dispossessed": Book.objects.create(title="The Dispossessed", author=le_guin, year=1974, owner=ann,
                                            internal_note="signed copy"),
        "lathe": Book.objects.create(title="The Lathe of Heaven", author=le_guin, year=1971, owner=ann, public=False),
        "ficciones": Book.objects.create(title="Ficciones", author=borges, year=1944, owner=bob),
        "aleph": Book.objects.create(title="El Aleph", author=borges, year=1949, owner=bob, public=False,
                                     genre="essay"),
    }
    return {"ann": ann, "bob": bob, "borges": borges, **books}


def titles(client, **arguments):
    return [item["title"] for item in result(client, "shelf_list", **arguments)["items"]]


def test_the_permission_classes_decide_which_tools_a_user_sees(shelf):
    assert SHELF_TOOLS.isdisjoint(names(client_of()))  # anonymous: DjangoModelPermissions says no
    assert SHELF_TOOLS & names(client_of(user_with("nobody"))) == set()
    assert SHELF_TOOLS & names(client_of(shelf["bob"])) == {"shelf_list", "shelf_get"}
    assert SHELF_TOOLS <= names(client_of(shelf["ann"]))
    with pytest.raises(ProtocolError) as refused:
        call(client_of(shelf["bob"]), "shelf_delete", pk=shelf["ficciones"].pk)
    assert refused.value.code == -32602 and "Unknown tool" in str(refused.value)


def test_each_user_reads_its_rows_and_fields_through_the_viewset(shelf):
    ann, bob = client_of(shelf["ann"]), client_of(shelf["bob"])
    assert titles(ann) == ["Ficciones", "The Dispossessed", "The Lathe of Heaven"]
    assert titles(bob) == ["El Aleph", "Ficciones", "The Dispossessed"]
    page = result(bob, "shelf_list")
    assert page["count"] == 3 and all("internal_note" not in item for item in page["items"])
    staff = client_of(user_with("staff", "view_book", staff=True))
    assert len(titles(staff)) == 4
    assert result(staff, "shelf_get", pk=shelf["dispossessed"].pk)["internal_note"] == "signed copy"
    assert "internal_note" not in result(ann, "shelf_get", pk=shelf["dispossessed"].pk)
    hidden = call(bob, "shelf_get", pk=shelf["lathe"].pk)
    assert hidden.is_error and hidden.text == f"No book with pk {shelf['lathe'].pk!r}."


def test_search_ordering_and_django_filter_are_the_backends(shelf):
    ann = client_of(shelf["ann"])
    assert titles(ann, search="borges") == ["Ficciones"]
    assert titles(ann, ordering="-year") == ["The Dispossessed", "The Lathe of Heaven", "Ficciones"]
    assert titles(ann, year__gte=1950) == ["The Dispossessed", "The Lathe of Heaven"]
    assert titles(ann, year__lte="1950", genre="novel") == ["Ficciones"]
    undeclared = call(ann, "shelf_list", owner=shelf["bob"].pk)  # not a parameter of the backends
    assert undeclared.is_error and "owner" in undeclared.text


def test_pages_follow_the_viewsets_pagination_through_a_signed_cursor(shelf):
    ann = client_of(shelf["ann"])
    for n in range(25):
        Book.objects.create(title=f"Vol {n:02}", author=shelf["borges"], year=2000 + n, owner=shelf["ann"])
    seen, cursor, pages = [], None, 0
    while True:
        page = result(ann, "shelf_list", search="Vol", **({"cursor": cursor} if cursor else {}))
        seen += [item["title"] for item in page["items"]]
        pages += 1
        cursor = page.get("nextCursor")
        if cursor is None:
            break
    assert pages == 3 and seen == [f"Vol {n:02}" for n in range(25)]
    other = call(ann, "shelf_list", search="Fic", cursor=result(ann, "shelf_list", search="Vol")["nextCursor"])
    assert other.is_error and "other arguments" in other.text
    forged = call(ann, "shelf_list", cursor="page=2")
    assert forged.is_error and forged.text == "The cursor is not one this tool issued."


def test_writes_run_the_serializer_and_the_object_permissions(shelf):
    ann, bob = client_of(shelf["ann"]), client_of(shelf["bob"])
    made = result(ann, "shelf_create", title="Labyrinths", author=shelf["borges"].pk, year=1962)
    assert Book.objects.get(pk=made["id"]).owner == shelf["ann"]  # perform_create
    invalid = call(ann, "shelf_create", title="", author=shelf["borges"].pk, year=3000)
    assert invalid.is_error
    assert invalid.text == ("Invalid book: title: This field may not be blank.; "
                            "year: A book from the future? Give the year it was published.")
    assert result(ann, "shelf_update", pk=made["id"], year=1964)["year"] == 1964
    # Ann may change books, but not Bob's: the object permission refuses, as "not found".
    theirs = call(ann, "shelf_update", pk=shelf["ficciones"].pk, year=1)
    assert theirs.is_error and theirs.text == f"No book with pk {shelf['ficciones'].pk!r}."
    assert Book.objects.get(pk=shelf["ficciones"].pk).year == 1944
    assert result(ann, "shelf_publish", pk=shelf["lathe"].pk)["public"] is True
    assert result(ann, "shelf_delete", pk=made["id"]) == {"deleted": made["id"]}
    assert not Book.objects.filter(pk=made["id"]).exists()
    assert call(bob, "shelf_get", pk=made["id"]).is_error


def test_the_throttle_applies_per_user(shelf):
    bob, ann = client_of(shelf["bob"]), client_of(shelf["ann"])
    for _ in range(20):  # ShelfThrottle: 20 a minute
        assert not call(bob, "shelf_get", pk=shelf["ficciones"].pk).is_error
    throttled = call(bob, "shelf_get", pk=shelf["ficciones"].pk)
    assert throttled.is_error and throttled.text.startswith("Throttled: Request was throttled. Expected available in")
    assert not call(ann, "shelf_get", pk=shelf["ficciones"].pk).is_error  # another user's count


def test_actions_limit_the_tools_and_a_name_may_not_collide():
    registry = Registry()
    from tools.library.api import ShelfViewSet

    register_viewset(ShelfViewSet, name="books", actions=["list", "retrieve"], registry=registry)
    assert set(registry.tools) == {"books_list", "books_get"}
    with pytest.raises(ImproperlyConfigured, match="not a viewset"):
        register_viewset(object, registry=registry)


def test_the_app_imports_and_runs_without_drf(tmp_path):
    """DRF is an optional extra: with it hidden, the app, its toolsets and its models load."""
    code = """
import sys
sys.modules["rest_framework"] = None  # import rest_framework now raises ImportError
import django
from django.conf import settings
settings.configure(INSTALLED_APPS=["django.contrib.auth", "django.contrib.contenttypes", "mcp_transport"],
                   DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}})
django.setup()
import mcp_transport.toolsets
from mcp_transport.toolsets import ModelToolset, register_admin, register_viewset
try:
    register_viewset(object)
except ImportError:
    print("drf needed only by register_viewset")
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "drf needed only by register_viewset"


def test_a_failing_permission_class_hides_its_tool_and_says_so(shelf, caplog):
    from rest_framework import permissions

    from tools.library.api import ShelfViewSet

    class Broken(permissions.BasePermission):
        def has_permission(self, request, view):
            raise KeyError("a bug")

    class BrokenViewSet(ShelfViewSet):
        permission_classes = [Broken]

    registry = Registry()
    register_viewset(BrokenViewSet, name="broken", actions=["list"], registry=registry)
    principal = type("Principal", (), {"user": shelf["ann"]})()
    assert registry.tools["broken_list"].visible(principal) is False
    assert "BrokenViewSet: its permission classes failed for list" in caplog.text
