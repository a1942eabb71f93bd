"""ModelToolset and register_admin on the example library (tools/library/mcp_tools.py), through the
server's own dispatch (LocalClient): which tools each user sees, which rows and fields each
reads, filters, search, ordering, cursors, and the ModelForm writes."""
import json

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import Permission, User

from tools.library.models import Author, Book
from mcp_transport.protocol.errors import ProtocolError
from mcp_transport.testing.local import LocalClient

pytestmark = pytest.mark.django_db(transaction=True)

BOOK_TOOLS = {"book_list", "book_get", "book_create", "book_update", "book_delete"}


def user_with(username, *codenames, staff=False):
    user = User.objects.create(username=username, is_staff=staff)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="library", codename__in=codenames))
    user = User.objects.get(pk=user.pk)
    user.get_all_permissions()  # loaded, as auth.load_user does: tools/list runs on the event loop
    return user


def client_of(user=None):
    return LocalClient(user=user)


@pytest.fixture
def shelf():
    """Two owners' books, public and private."""
    ann, bob = user_with("ann", "view_book", "change_book", "delete_book"), user_with("bob", "view_book")
    le_guin = Author.objects.create(name="Ursula K. Le Guin", country="US")
    borges = Author.objects.create(name="Jorge Luis Borges", country="AR")
    books = {
        "dispossessed": Book.objects.create(title="The Dispossessed", author=le_guin, year=1974, owner=ann,
                                            internal_note="signed copy"),
        "lathe": Book.objects.create(title="The Lathe of Heaven", author=le_guin, year=1971, owner=ann, public=False),
        "ficciones": Book.objects.create(title="Ficciones", author=borges, year=1944, owner=bob),
        "aleph": Book.objects.create(title="El Aleph", author=borges, year=1949, owner=bob, public=False,
                                     genre="essay"),
    }
    return {"ann": ann, "bob": bob, "le_guin": le_guin, "borges": borges, **books}


def names(client):
    return {tool["name"] for tool in async_to_sync(client.list_tools)()}


def call(client, name, /, **arguments):
    return client.call_tool_sync(name, arguments)


def result(client, name, /, **arguments):
    done = call(client, name, **arguments)
    assert not done.is_error, done.text
    return done.structured


def titles(client, **arguments):
    return [item["title"] for item in result(client, "book_list", **arguments)["items"]]


def test_tools_follow_the_model_permissions(shelf):
    assert BOOK_TOOLS.isdisjoint(names(client_of()))  # anonymous: none
    viewer = client_of(user_with("viewer", "view_book"))
    assert BOOK_TOOLS & names(viewer) == {"book_list", "book_get"}
    editor = client_of(user_with("editor", "view_book", "add_book", "change_book"))
    assert BOOK_TOOLS & names(editor) == {"book_list", "book_get", "book_create", "book_update"}
    # A tool the caller may not use is unknown to tools/call, as one that does not exist.
    with pytest.raises(ProtocolError) as refused:
        call(viewer, "book_delete", id=shelf["ficciones"].pk)
    assert refused.value.code == -32602 and "Unknown tool" in str(refused.value)
    assert Book.objects.filter(pk=shelf["ficciones"].pk).exists()


def test_each_user_reads_only_its_rows_and_fields(shelf):
    ann, bob = client_of(shelf["ann"]), client_of(shelf["bob"])
    assert titles(ann) == ["Ficciones", "The Dispossessed", "The Lathe of Heaven"]
    assert titles(bob) == ["El Aleph", "Ficciones", "The Dispossessed"]
    # Another's private row is not found, through every tool and the resource alike.
    lathe = shelf["lathe"].pk
    assert call(bob, "book_get", id=lathe).text == f"No book with id {lathe}."
    with pytest.raises(ProtocolError) as missing:
        async_to_sync(bob.read_resource)(f"django://library.book/{lathe}")
    assert missing.value.code == -32002
    # The internal note: staff only, and absent (not null) for the others.
    staff = client_of(user_with("librarian", "view_book", staff=True))
    assert result(staff, "book_get", id=shelf["dispossessed"].pk)["internal_note"] == "signed copy"
    seen = result(ann, "book_get", id=shelf["dispossessed"].pk)
    assert "internal_note" not in seen and seen["title"] == "The Dispossessed"
    assert all("internal_note" not in item for item in result(ann, "book_list")["items"])
    assert len(titles(staff)) == 4


def test_filters_search_and_ordering(shelf):
    ann = client_of(shelf["ann"])
    assert titles(ann, author=shelf["borges"].pk) == ["Ficciones"]
    assert titles(ann, year__gte=1950, ordering="-year") == ["The Dispossessed", "The Lathe of Heaven"]
    assert titles(ann, search="borges") == ["Ficciones"]
    assert titles(ann, search="the heaven") == ["The Lathe of Heaven"]  # every word must match
    assert titles(ann, genre__in=["essay", "poetry"]) == []  # El Aleph is bob's private essay
    assert titles(ann, title__icontains="DISPOSSESSED") == ["The Dispossessed"]
    refused = call(ann, "book_list", owner=shelf["bob"].pk)  # not a declared filter
    assert refused.is_error and "owner" in refused.text
    refused = call(ann, "book_list", ordering="internal_note")
    assert refused.is_error and "internal_note" in refused.text


def test_cursor_pages_are_stable_and_bound_to_their_query(shelf):
    staff = client_of(user_with("librarian", "view_book", staff=True))
    for n in range(7):
        Book.objects.create(title=f"Volume {n}", author=shelf["borges"], year=2000 + n % 2)
    seen, cursor, pages = [], None, 0
    while True:
        arguments = {"ordering": "year", "limit": 3, **({"cursor": cursor} if cursor else {})}
        page = result(staff, "book_list", **arguments)
        seen += [item["id"] for item in page["items"]]
        pages += 1
        if pages == 1:  # a row added before the cursor's place moves nothing after it
            Book.objects.create(title="Early", author=shelf["borges"], year=1900)
        cursor = page.get("nextCursor")
        if not cursor:
            break
    assert pages == 4 and len(seen) == len(set(seen)) == 11
    ordered = list(Book.objects.exclude(title="Early").order_by("year", "pk").values_list("pk", flat=True))
    assert seen == ordered
    first = result(staff, "book_list", limit=2)
    other = call(staff, "book_list", limit=2, search="x", cursor=first["nextCursor"])
    assert other.is_error and "other arguments" in other.text
    forged = call(staff, "book_list", cursor="nonsense")
    assert forged.is_error and "not one this tool issued" in forged.text


def test_create_update_delete_through_the_form_each_in_a_transaction(shelf):
    writer = client_of(user_with("writer", "view_book", "add_book", "change_book", "delete_book"))
    made = result(writer, "book_create", title="Labyrinths", author=shelf["borges"].pk, year=1962)
    book = Book.objects.get(pk=made["id"])
    assert book.owner.username == "writer" and book.public is True  # the model default, not "unticked"
    assert made == {**made, "title": "Labyrinths", "year": 1962, "genre": "novel"}
    changed = result(writer, "book_update", id=book.pk, year=1964)
    assert changed["year"] == 1964 and changed["title"] == "Labyrinths"
    invalid = call(writer, "book_update", id=book.pk, author=999999)
    assert invalid.is_error and invalid.text.startswith("Invalid book: author:")
    assert Book.objects.get(pk=book.pk).author == shelf["borges"]
    missing = call(writer, "book_create", author=shelf["borges"].pk)
    assert missing.is_error and "title" in missing.text
    # Another owner's row: visible (it is public) but not the writer's to change or delete.
    assert call(writer, "book_update", id=shelf["ficciones"].pk, year=1).is_error
    assert call(writer, "book_delete", id=shelf["ficciones"].pk).is_error
    assert Book.objects.get(pk=shelf["ficciones"].pk).year == 1944
    assert result(writer, "book_delete", id=book.pk) == {"deleted": book.pk}
    assert not Book.objects.filter(pk=book.pk).exists()


@pytest.fixture
def scratch_tools():
    """Register toolsets for one test, under names of their own."""
    from mcp_transport.methods.registry import registry

    before = set(registry.tools)
    yield
    for name in set(registry.tools) - before:
        del registry.tools[name]


def test_a_failed_write_leaves_nothing_and_a_protected_row_says_why(shelf, scratch_tools):
    from mcp_transport.toolsets import ModelToolset, register

    @register
    class FailingAuthors(ModelToolset):
        model, name, fields, create, delete = Author, "scratch_author", ["name", "country"], True, True

        def save(self, ctx, form, created):
            form.save()
            raise RuntimeError("after the row was written")

    root = client_of(User.objects.create_superuser("root", "root@example.com", "pw"))
    failed = call(root, "scratch_author_create", name="Half Written")
    assert failed.is_error and not Author.objects.filter(name="Half Written").exists()  # rolled back
    protected = call(root, "scratch_author_delete", id=shelf["borges"].pk)
    assert protected.is_error and protected.text.startswith("This author cannot be deleted")
    assert Author.objects.filter(pk=shelf["borges"].pk).exists()
    assert "author_delete" not in names(root)  # the admin's author tools: delete not opted in


def test_the_admin_source_uses_the_model_admin(shelf):
    viewer = client_of(user_with("catalogue", "view_author"))
    assert {"author_list", "author_get"} <= names(viewer) and "author_create" not in names(viewer)
    page = result(viewer, "author_list")
    assert [(a["name"], a["country"], a["display"]) for a in page["items"]] == [
        ("Jorge Luis Borges", "AR", "Jorge Luis Borges"), ("Ursula K. Le Guin", "US", "Ursula K. Le Guin")]
    assert [a["name"] for a in result(viewer, "author_list", search="ursula")["items"]] == ["Ursula K. Le Guin"]
    assert [a["name"] for a in result(viewer, "author_list", country="AR")["items"]] == ["Jorge Luis Borges"]
    adder = client_of(user_with("cataloguer", "view_author", "add_author"))
    made = result(adder, "author_create", name="Italo Calvino", country="IT")
    assert made["display"] == "Italo Calvino" and Author.objects.filter(name="Italo Calvino").exists()
    too_long = call(adder, "author_create", name="x", country="ITA")
    assert too_long.is_error


def test_resource_template_reads_a_row_as_json(shelf):
    import json

    ann = client_of(shelf["ann"])
    uri = f"django://library.book/{shelf['lathe'].pk}"
    contents = async_to_sync(ann.read_resource)(uri)
    assert contents[0]["uri"] == uri and contents[0]["mimeType"] == "application/json"
    assert json.loads(contents[0]["text"])["title"] == "The Lathe of Heaven"
    templates = async_to_sync(ann.request)("resources/templates/list")["resourceTemplates"]
    assert "django://library.book/{pk}" in {t["uriTemplate"] for t in templates}
    anonymous = async_to_sync(client_of().request)("resources/templates/list")["resourceTemplates"]
    assert "django://library.book/{pk}" not in {t["uriTemplate"] for t in anonymous}


def listed_uris(client) -> list:
    """Every URI of resources/list, page after page."""
    uris, cursor = [], None
    while True:
        page = async_to_sync(client.request)("resources/list", {"cursor": cursor} if cursor else {})
        uris += [entry["uri"] for entry in page["resources"]]
        cursor = page.get("nextCursor")
        if cursor is None:
            return uris


def test_resources_list_pages_through_the_callers_rows_after_the_resources(shelf, settings):
    import base64
    import json

    settings.MCP_TRANSPORT = {**settings.MCP_TRANSPORT, "PAGE_SIZE": 2}
    uris = listed_uris(client_of(shelf["ann"]))
    rows = [uri for uri in uris if uri.startswith("django://library.book/")]
    expected = sorted(shelf[key].pk for key in ("dispossessed", "lathe", "ficciones"))  # not bob's private one
    assert rows == [f"django://library.book/{pk}" for pk in expected]
    assert uris[:-len(rows)] and len(uris) == len(set(uris))  # the plain resources came first
    anonymous = listed_uris(client_of())
    # No view permission: no rows (nor a skill that needs a permission, when one is registered,
    # nor an MCP Apps view, which only those who may use one of its tools see: test_apps.py).
    plain = [uri for uri in uris[:-len(rows)] if not uri.startswith(("skill://", "ui://"))]
    assert [uri for uri in anonymous if not uri.startswith("skill://")] == plain
    forged = base64.urlsafe_b64encode(json.dumps({"rows": "django://library.book/{pk}", "at": "x"}).encode())
    with pytest.raises(ProtocolError) as refused:
        async_to_sync(client_of(shelf["ann"]).request)("resources/list", {"cursor": forged.decode()})
    assert refused.value.code == -32602


def test_arguments_beyond_the_fields_and_limits_are_refused_before_the_query(shelf):
    ann = client_of(shelf["ann"])
    for name, arguments in (("book_get", {"id": 2 ** 70}), ("book_list", {"year__gte": -(2 ** 70)}),
                            ("book_list", {"search": "word " * 100}), ("book_list", {"genre__in": ["novel"] * 101}),
                            ("book_list", {"limit": 21}), ("book_list", {"genre": "opera"})):
        refused = call(ann, name, **arguments)
        assert refused.is_error and refused.text.startswith(f"Invalid arguments for tool {name}"), refused.text


def test_a_reverse_relation_is_not_a_field():
    from django.core.exceptions import ImproperlyConfigured

    from mcp_transport.toolsets import ModelToolset

    class AuthorTools(ModelToolset):
        model, fields = Author, ["name", "books"]

    with pytest.raises(ImproperlyConfigured, match="books is a reverse relation"):
        AuthorTools()


def test_a_hidden_field_cannot_be_filtered_searched_or_sorted_by(shelf, scratch_tools):
    from mcp_transport.toolsets import ModelToolset, register

    @register
    class NotedBooks(ModelToolset):
        model, name = Book, "scratch_book"
        fields = ["title", "internal_note", "year"]
        filters = {"internal_note": ["icontains"], "year": ["gte"]}
        search_fields = ["title", "internal_note"]
        ordering = ["title", "internal_note"]

        def get_fields(self, ctx):
            return ["title", "year"] + (["internal_note"] if ctx.user.is_staff else [])

    ann = client_of(shelf["ann"])
    for arguments in ({"internal_note__icontains": "signed"}, {"ordering": "-internal_note"}, {"search": "signed"}):
        refused = call(ann, "scratch_book_list", **arguments)
        assert refused.is_error and refused.text.startswith("Not available to this caller"), refused.text
    assert [b["title"] for b in result(ann, "scratch_book_list", year__gte=1970)["items"]] == [
        "The Dispossessed", "The Lathe of Heaven"]
    staff = client_of(user_with("librarian", "view_book", staff=True))
    found = result(staff, "scratch_book_list", internal_note__icontains="signed", search="signed")["items"]
    assert [(b["title"], b["internal_note"]) for b in found] == [("The Dispossessed", "signed copy")]


def test_the_admin_sources_querysets_and_object_permissions_are_the_model_admins(shelf, scratch_tools):
    from django.contrib import admin

    from tools.library.admin import BookAdmin
    from mcp_transport.toolsets import register_admin

    class OwnBooksAdmin(BookAdmin):
        list_filter = ("genre", "public", "added")

        def get_queryset(self, request):
            return super().get_queryset(request).filter(public=True) | super().get_queryset(request).filter(
                owner=request.user.pk)

        def has_change_permission(self, request, obj=None):
            allowed = super().has_change_permission(request, obj)
            return allowed and (obj is None or obj.owner_id == request.user.pk)

    site = admin.AdminSite(name="scratch")
    site.register(Book, OwnBooksAdmin)
    register_admin(Book, site=site, name="scratch_adminbook", update=True)
    from mcp_transport.methods.registry import registry

    schema = registry.tools["scratch_adminbook_list"].input_schema["properties"]
    assert {"genre", "public", "added__gte", "added__lte", "search", "ordering"} <= set(schema)
    assert set(registry.tools["scratch_adminbook_get"].output_schema["properties"]) == {
        "id", "title", "author", "year", "owner", "public", "display"}
    ann = client_of(shelf["ann"])  # view, change and delete books
    listed = result(ann, "scratch_adminbook_list", search="le guin")["items"]
    assert sorted(b["title"] for b in listed) == ["The Dispossessed", "The Lathe of Heaven"]
    assert [b["title"] for b in result(ann, "scratch_adminbook_list", public=False)["items"]] == [
        "The Lathe of Heaven"]  # bob's private book is outside the admin's queryset for ann
    assert result(ann, "scratch_adminbook_update", id=shelf["lathe"].pk, year=1972)["year"] == 1972
    refused = call(ann, "scratch_adminbook_update", id=shelf["ficciones"].pk, year=1)  # bob's: no change permission
    assert refused.is_error and Book.objects.get(pk=shelf["ficciones"].pk).year == 1944
    assert "scratch_adminbook_update" not in names(client_of(shelf["bob"]))  # bob lacks change_book


def answering(confirm):
    """A client that answers the confirmation with ``confirm`` (None: declines)."""
    asked = []

    def answer(method, params):
        asked.append(params["message"])
        if confirm is None:
            return {"action": "decline"}
        return {"action": "accept", "content": {"confirm": confirm}}
    return answer, asked


def test_admin_actions_are_tools_the_admin_offers_and_destructive_ones_confirm(shelf):
    calvino = Author.objects.create(name="Italo Calvino", country="IT")
    viewer = client_of(user_with("looker", "view_author"))
    assert {"author_clear_country", "author_delete_selected"}.isdisjoint(names(viewer))
    changer = user_with("changer", "view_author", "change_author")
    assert "author_clear_country" in names(client_of(changer)) and "author_delete_selected" not in names(
        client_of(changer))
    done = result(client_of(changer), "author_clear_country", ids=[calvino.pk, shelf["borges"].pk])
    assert done == {"action": "clear_country", "count": 2, "messages": ["Cleared the country of 2 author(s)."]}
    assert set(Author.objects.filter(pk__in=[calvino.pk, shelf["borges"].pk]).values_list("country", flat=True)) \
        == {""}
    missing = call(client_of(changer), "author_clear_country", ids=[calvino.pk, 999999])
    assert missing.is_error and missing.text == "Not every author of ids was found."

    deleter = user_with("deleter", "view_author", "delete_author")
    for confirm in (None, False):
        answer, asked = answering(confirm)
        client = LocalClient(user=deleter, client_capabilities={"elicitation": {}}, answer=answer)
        refused = call(client, "author_delete_selected", ids=[calvino.pk])
        assert refused.is_error and refused.text == "Not confirmed: nothing was done."
        assert asked == ["Delete selected authors: 1 author. Go ahead?"]
    assert Author.objects.filter(pk=calvino.pk).exists()
    answer, asked = answering(True)
    client = LocalClient(user=deleter, client_capabilities={"elicitation": {}}, answer=answer)
    assert result(client, "author_delete_selected", ids=[calvino.pk])["messages"] == ["Successfully deleted 1 author."]
    assert not Author.objects.filter(pk=calvino.pk).exists()
    protected = call(client, "author_delete_selected", ids=[shelf["borges"].pk])  # his books protect him
    assert protected.is_error and "answered with a page" in protected.text
    assert Author.objects.filter(pk=shelf["borges"].pk).exists()
    no_elicitation = call(LocalClient(user=deleter), "author_delete_selected", ids=[shelf["le_guin"].pk])
    assert no_elicitation.is_error and Author.objects.filter(pk=shelf["le_guin"].pk).exists()


# -- list_all: the whole query as a background job (background = True) --------------------------

def test_list_all_returns_the_whole_query_in_chunks_with_progress(shelf, monkeypatch):
    from tools.library.mcp_tools import BookTools

    for n in range(250):
        Book.objects.create(title=f"Vol {n:03}", author=shelf["borges"], year=n, owner=shelf["ann"],
                            public=n % 5 != 0, internal_note="staff only")
    bob = client_of(shelf["bob"])
    done = bob.call_tool_sync("book_list_all", {"title__icontains": "Vol", "ordering": "-year"})
    assert not done.is_error, done.text
    years = [item["year"] for item in done.structured["items"]]
    assert years == [n for n in range(249, -1, -1) if n % 5 != 0]  # public ones only: 200, in order
    assert done.structured["count"] == 200 and done.structured["truncated"] is False
    assert all("internal_note" not in item for item in done.structured["items"])
    # A chunk is 100 rows (the example's background_chunk): one progress notification each.
    assert [(p["progress"], p["total"]) for p in done.progress] == [(100, 200), (200, 200)]
    monkeypatch.setattr(BookTools, "background_max_rows", 150)
    capped = result(bob, "book_list_all", title__icontains="Vol")
    assert capped["count"] == 150 and capped["truncated"] is True


def test_list_all_keeps_its_result_within_one_event(shelf, settings):
    from mcp_transport.conf import get_config

    for n in range(60):
        Book.objects.create(title=f"Long {n:02} " + "x" * 180, author=shelf["borges"], owner=shelf["ann"])
    settings.MCP_TRANSPORT = {**settings.MCP_TRANSPORT, "MAX_EVENT_BYTES": 8192 * 2 + 3 * 4096}
    get_config.cache_clear()
    try:
        whole = result(client_of(shelf["ann"]), "book_list_all", title__icontains="Long")
    finally:
        get_config.cache_clear()
    assert whole["truncated"] is True and 0 < whole["count"] < 60
    assert len(json.dumps(whole["items"]).encode()) <= 8192 + 4096
    assert "book_list_all" not in names(client_of(user_with("nobody")))


def test_register_admin_takes_background_too():
    from mcp_transport.methods.registry import Registry
    from mcp_transport.toolsets import register_admin

    registry = Registry()
    register_admin(Author, name="writers", background={"queue": "reports"}, registry=registry)
    spec = registry.tools["writers_list_all"]
    assert spec.background and spec.job_options == {"queue": "reports"} and spec.task_support == "optional"
    assert "cursor" not in spec.input_schema["properties"] and "search" in spec.input_schema["properties"]
