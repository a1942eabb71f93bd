"""MCP Apps (``io.modelcontextprotocol/ui``, SEP-1865) on a real daphne, in both eras: the
extension declared and the client's declaration read by a tool; the example project's views
(tools/library/mcp_apps.py) rendered from Django templates with their static files inlined;
a ``ui://`` resource listed and read exactly by those who may use one of its tools; a view's
own ``tools/call`` an ordinary call, refused to a user without the tool's permission."""
import json
import uuid

import pytest

from mcp_transport.testing import HttpClient, ModernClient

from .test_auth import new_token
from .test_toolsets import shell

UI = "io.modelcontextprotocol/ui"
MIME = "text/html;profile=mcp-app"
CARD, EDITOR = "ui://library/book-card", "ui://library/book-editor"
RENDERS_APPS = {"extensions": {UI: {"mimeTypes": [MIME]}}}
VERSIONS = ["2026-07-28", "2025-11-25"]


@pytest.fixture(scope="module")
def people(server_env):
    """A book, and tokens of an editor (view_book, change_book), a viewer (view_book) and a
    user without the library's permissions."""
    prefix = f"apps{uuid.uuid4().hex[:8]}"  # per module that uses it (test_apps_hosts.py too)
    book = json.loads(shell(server_env, f"""
import json
from django.contrib.auth.models import Permission, User
from tools.library.models import Author, Book
def perm(codename):
    return Permission.objects.get(content_type__app_label="library", codename=codename)
editor = User.objects.create(username="{prefix}-editor")
editor.user_permissions.add(perm("view_book"), perm("change_book"))
User.objects.create(username="{prefix}-viewer").user_permissions.add(perm("view_book"))
User.objects.create(username="{prefix}-nobody")
author = Author.objects.create(name="Ursula K. Le Guin")
book = Book.objects.create(title="The Dispossessed", author=author, year=1974, owner=editor)
print(json.dumps(book.pk))
""").strip().splitlines()[-1])
    return {"prefix": prefix, "book": book,
            **{name: new_token(server_env, f"{prefix}-{name}") for name in ("editor", "viewer", "nobody")}}


def client(server, token, version, capabilities=None):
    """A client of ``version``'s era with ``token`` declaring ``capabilities``: ``ask(method,
    params)`` gives the JSON-RPC response."""
    if version == "2026-07-28":
        modern = ModernClient(server.url, capabilities=capabilities or {})
        modern.token = token
        return lambda method, params=None: modern.post(method, params or {}).json
    legacy = HttpClient(server.url, token=token)
    legacy.initialize(capabilities=capabilities or {})
    return lambda method, params=None: legacy.call(method, params or {})


def test_the_extension_is_declared_in_both_eras(mcp_server):
    legacy = HttpClient(mcp_server.url)
    declared = legacy.initialize().json["result"]["capabilities"]["extensions"]
    assert declared[UI] == {"mimeTypes": [MIME]}
    discovered = ModernClient(mcp_server.url).post("server/discover", {}).json["result"]["capabilities"]["extensions"]
    assert discovered[UI] == {"mimeTypes": [MIME]}


@pytest.mark.parametrize("version", VERSIONS)
def test_a_tool_reads_whether_the_client_renders_apps(auth_server, people, version):
    call = {"name": "book_card", "arguments": {"book_id": people["book"]}}
    with_apps = client(auth_server, people["viewer"], version, RENDERS_APPS)("tools/call", call)["result"]
    without = client(auth_server, people["viewer"], version)("tools/call", call)["result"]
    card = {"id": people["book"], "title": "The Dispossessed", "author": "Ursula K. Le Guin", "year": 1974,
            "genre": "Novel"}
    assert with_apps["structuredContent"] == without["structuredContent"] == card
    assert with_apps["content"][0]["text"] == "Shown in the book card: The Dispossessed by Ursula K. Le Guin (1974), novel."
    assert without["content"][0]["text"] == "The Dispossessed by Ursula K. Le Guin (1974), novel."


@pytest.mark.parametrize("version", VERSIONS)
def test_tools_name_their_views_for_those_who_may_use_them(auth_server, people, version):
    def tools(name):
        listed = client(auth_server, people[name], version)("tools/list")["result"]["tools"]
        return {tool["name"]: tool["_meta"]["ui"] for tool in listed if "ui" in tool.get("_meta", {})}

    assert tools("editor") == {"book_card": {"resourceUri": CARD}, "book_editor": {"resourceUri": EDITOR},
                               "book_retitle": {"resourceUri": EDITOR, "visibility": ["app"]}}
    assert tools("viewer") == {"book_card": {"resourceUri": CARD}, "book_editor": {"resourceUri": EDITOR}}
    assert tools("nobody") == {}


@pytest.mark.parametrize("version", VERSIONS)
def test_views_are_listed_exactly_for_those_who_may_use_one_of_their_tools(auth_server, people, version):
    def views(name):
        listed = client(auth_server, people[name], version)("resources/list")["result"]["resources"]
        return {entry["uri"]: entry for entry in listed if entry["uri"].startswith("ui://")}

    seen = views("viewer")
    assert sorted(seen) == [CARD, EDITOR]
    assert seen[CARD] == {"uri": CARD, "name": "library/book-card", "title": "Book card", "mimeType": MIME,
                          "description": "A book's card: its title, author, year and genre.",
                          "_meta": {"ui": {"prefersBorder": True}}}
    assert views("nobody") == {}


@pytest.mark.parametrize("version", VERSIONS)
def test_a_view_is_a_whole_document_rendered_for_its_reader(auth_server, people, version):
    answer = client(auth_server, people["viewer"], version)("resources/read", {"uri": CARD})
    (item,) = answer["result"]["contents"]
    assert (item["uri"], item["mimeType"], item["_meta"]) == (CARD, MIME, {"ui": {"prefersBorder": True}})
    html = item["text"]
    assert html.startswith("<!DOCTYPE html>\n<html lang=\"en-us\">") and html.rstrip().endswith("</html>")
    assert f"Shown to {people['prefix']}-viewer" in html  # the caller's user, in its language
    # Its static files inlined: nothing to fetch, the host's default CSP holds.
    assert "--color-text-primary" in html and "ui/notifications/tool-result" in html and "ui/initialize" in html
    assert "<script src" not in html and "<link" not in html
    if version == "2026-07-28":  # it depends on the user: not to be shared between users' caches
        assert answer["result"]["cacheScope"] == "private"


@pytest.mark.parametrize("version", VERSIONS)
def test_to_a_user_without_its_tools_a_view_does_not_exist(auth_server, people, version):
    resource_not_found = -32602 if version == "2026-07-28" else -32002  # each era's code
    nobody = client(auth_server, people["nobody"], version)
    for uri in (CARD, EDITOR):
        error = nobody("resources/read", {"uri": uri})["error"]
        assert (error["code"], error["message"]) == (resource_not_found, f"Resource not found: {uri}.")
    viewer = client(auth_server, people["viewer"], version)
    error = viewer("resources/read", {"uri": "ui://library/no-such-view"})["error"]
    assert error["code"] == resource_not_found


@pytest.mark.parametrize("version", VERSIONS)
def test_a_views_own_call_is_an_ordinary_call_with_the_users_permissions(auth_server, people, version):
    call = {"name": "book_retitle", "arguments": {"book_id": people["book"], "title": "The Dispossessed"}}
    refused = client(auth_server, people["viewer"], version)("tools/call", call)
    assert refused["error"]["code"] == -32602 and "book_retitle" in refused["error"]["message"]
    changed = client(auth_server, people["editor"], version)("tools/call", call)["result"]
    assert not changed.get("isError") and changed["structuredContent"]["title"] == "The Dispossessed"
