"""Models as tools and resources (issue 22) on a real daphne with ``MCP_AUTH=on``: the official
SDK client, in both eras, as users with different permissions and static tokens of
``manage.py mcp_tokens``, never sees a tool, row or field it may not (tools/library/mcp_tools.py)."""
import json
import subprocess
import sys
import os

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from .test_auth import ROOT, new_token

pytestmark = [pytest.mark.asyncio, pytest.mark.filterwarnings("ignore:The logging capability is deprecated")]

ERAS = [("auto", "2026-07-28"), ("legacy", "2025-11-25")]
BOOK_TOOLS = {"book_list", "book_get", "book_create", "book_update", "book_delete"}

# Users of this module (their names are the run's own: the database may hold earlier runs').
SHELF = """
from django.contrib.auth.models import Permission, User
from tools.library.models import Author, Book
perms = lambda *codes: Permission.objects.filter(content_type__app_label="library", codename__in=codes)
users = {}
for name, codes, staff in (("reader", ("view_book",), False), ("writer", ("view_book", "add_book", "change_book",
        "delete_book"), False), ("nobody", (), False), ("librarian", ("view_book", "view_author"), True),
        ("cataloguer", ("view_author", "delete_author"), False)):
    users[name] = User.objects.create(username=f"{prefix}-{name}", is_staff=staff)
    users[name].user_permissions.add(*perms(*codes))
author = Author.objects.create(name=f"{prefix} Author", country="FR")
rows = {
    "public": Book.objects.create(title=f"{prefix} public", author=author, year=1990, owner=users["writer"],
                                  internal_note="staff eyes only"),
    "private": Book.objects.create(title=f"{prefix} private", author=author, year=1991, owner=users["writer"],
                                   public=False, internal_note="staff eyes only"),
}
lonely = {f"lonely_{mode}": Author.objects.create(name=f"{prefix} lonely {mode}").pk for mode in ("auto", "legacy")}
print(json.dumps({"author": author.pk, **lonely, **{key: row.pk for key, row in rows.items()}}))
"""


def shell(server_env, code) -> str:
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, **server_env}, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def shelf(server_env):
    prefix = f"shelf{os.getpid()}"
    rows = json.loads(shell(server_env, f"import json\nprefix = {prefix!r}\n{SHELF}").strip().splitlines()[-1])
    tokens = {name: new_token(server_env, f"{prefix}-{name}")
              for name in ("reader", "writer", "nobody", "librarian", "cataloguer")}
    return {"prefix": prefix, "tokens": tokens, **rows}



async def tool_names(client):
    return {tool.name for tool in (await client.list_tools()).tools}


async def titles(client, prefix, **arguments):
    result = await client.call_tool("book_list", {"title__icontains": prefix, **arguments})
    assert result.is_error is not True, result.content
    return {item["title"] for item in result.structured_content["items"]}, result.structured_content["items"]


@pytest.mark.parametrize("mode, version", ERAS)
async def test_a_user_without_permissions_sees_no_tool_and_calls_none(connect_as, shelf, mode, version):
    async with connect_as(shelf["tokens"]["nobody"], mode) as client:
        assert client.protocol_version == version
        assert BOOK_TOOLS.isdisjoint(await tool_names(client)) and "echo" in await tool_names(client)
        with pytest.raises(MCPError) as refused:
            await client.call_tool("book_list", {})
        assert refused.value.error.code == -32602 and "Unknown tool" in refused.value.error.message
        templates = (await client.list_resource_templates()).resource_templates
        assert "django://library.book/{pk}" not in {t.uri_template for t in templates}
        assert not any(uri.startswith("django://") for uri in await listed_uris(client))


@pytest.mark.parametrize("mode, version", ERAS)
async def test_a_reader_never_sees_a_private_row_or_the_staff_field(connect_as, shelf, mode, version):
    prefix = shelf["prefix"]
    async with connect_as(shelf["tokens"]["reader"], mode) as client:
        assert client.protocol_version == version
        assert BOOK_TOOLS & await tool_names(client) == {"book_list", "book_get"}
        seen, items = await titles(client, prefix)
        assert seen == {f"{prefix} public"}
        assert all("internal_note" not in item for item in items)
        assert f"{prefix} private" not in json.dumps([item for item in items])
        hidden = await client.call_tool("book_get", {"id": shelf["private"]})
        assert hidden.is_error and "private" not in hidden.content[0].text
        public = await client.call_tool("book_get", {"id": shelf["public"]})
        assert public.structured_content["title"] == f"{prefix} public"
        assert "internal_note" not in public.structured_content
        with pytest.raises(MCPError) as missing:
            await client.read_resource(f"django://library.book/{shelf['private']}")
        # -32002 in 2025-11-25; 2026-07-28 responses "MUST NOT emit -32002" (-32602 instead).
        assert missing.value.error.code == (-32002 if version == "2025-11-25" else -32602)
        assert missing.value.error.message == f"Resource not found: django://library.book/{shelf['private']}."
        read = await client.read_resource(f"django://library.book/{shelf['public']}")
        assert "staff eyes only" not in read.contents[0].text
        with pytest.raises(MCPError):  # not the reader's to call: unknown
            await client.call_tool("book_delete", {"id": shelf["public"]})
        listed = await listed_uris(client)
        assert f"django://library.book/{shelf['public']}" in listed
        assert f"django://library.book/{shelf['private']}" not in listed


async def listed_uris(client) -> list:
    """Every URI of resources/list, following nextCursor."""
    uris, cursor = [], None
    while True:
        page = await client.list_resources(cursor=cursor)
        uris += [str(resource.uri) for resource in page.resources]
        cursor = page.next_cursor
        if cursor is None:
            return uris


@pytest.mark.parametrize("mode, version", ERAS)
async def test_the_owner_and_staff_see_more(connect_as, shelf, mode, version):
    prefix = shelf["prefix"]
    async with connect_as(shelf["tokens"]["writer"], mode) as client:
        seen, items = await titles(client, prefix)
        assert seen == {f"{prefix} public", f"{prefix} private"}
        assert all("internal_note" not in item for item in items)
    async with connect_as(shelf["tokens"]["librarian"], mode) as client:
        seen, items = await titles(client, prefix)
        assert seen == {f"{prefix} public", f"{prefix} private"}
        assert {item["internal_note"] for item in items} == {"staff eyes only"}
        authors = await client.call_tool("author_list", {"search": f"{prefix} Author"})
        assert [a["display"] for a in authors.structured_content["items"]] == [f"{prefix} Author"]


@pytest.mark.parametrize("mode, version", ERAS)
async def test_writes_pages_and_the_next_request_sees_them(connect_as, shelf, mode, version):
    prefix = f"writes{os.getpid()}{mode}"  # not found by the other tests' searches for the shelf's prefix
    async with connect_as(shelf["tokens"]["writer"], mode) as writer:
        made = []
        for n in range(5):
            result = await writer.call_tool("book_create", {"title": f"{prefix} vol {n}", "author": shelf["author"],
                                                            "year": 2000 + n, "public": n % 2 == 0})
            assert result.is_error is not True, result.content
            made.append(result.structured_content["id"])
        invalid = await writer.call_tool("book_create", {"title": "", "author": shelf["author"]})
        assert invalid.is_error and "title" in invalid.content[0].text
        changed = await writer.call_tool("book_update", {"id": made[0], "year": 1999})
        assert changed.structured_content["year"] == 1999
        # Pages of two, by year, through nextCursor.
        pages, cursor, seen = 0, None, []
        while True:
            page = await writer.call_tool("book_list", {"search": prefix, "ordering": "year", "limit": 2,
                                                        **({"cursor": cursor} if cursor else {})})
            seen += [item["year"] for item in page.structured_content["items"]]
            pages += 1
            cursor = page.structured_content.get("nextCursor")
            if cursor is None:
                break
        assert pages == 3 and seen == [1999, 2001, 2002, 2003, 2004]
        deleted = await writer.call_tool("book_delete", {"id": made[1]})
        assert deleted.structured_content == {"deleted": made[1]}
    async with connect_as(shelf["tokens"]["reader"], mode) as reader:
        seen, _ = await titles(reader, prefix)
        assert seen == {f"{prefix} vol 0", f"{prefix} vol 2", f"{prefix} vol 4"}  # public ones; vol 1 deleted
        refused = await reader.call_tool("book_get", {"id": made[3]})  # private to the writer
        assert refused.is_error


async def test_stdio_with_a_user_sees_its_tools_and_rows(server_env, shelf):
    """``mcp_stdio --user``: the local user's permissions decide, as a token's user's do."""
    from mcp.client.stdio import stdio_client

    from .test_stdio import stdio_server

    prefix = shelf["prefix"]
    async with Client(stdio_client(stdio_server(server_env, "--user", f"{prefix}-reader")), mode="legacy") as client:
        assert BOOK_TOOLS & await tool_names(client) == {"book_list", "book_get"}
        seen, _ = await titles(client, prefix)
        assert seen == {f"{prefix} public"}


@pytest.mark.parametrize("mode, version", ERAS)
async def test_a_destructive_admin_action_asks_the_user_first(connect_as, shelf, mode, version):
    """delete_selected confirms through elicitation: on the call's stream (2025-11-25), or as an
    InputRequiredResult the SDK answers and sends again (2026-07-28)."""
    from mcp import types

    asked = []

    def confirming(answer):
        async def elicit(context, params):
            asked.append(params.message)
            return types.ElicitResult(action="accept", content={"confirm": answer})
        return elicit

    lonely = shelf[f"lonely_{mode}"]
    for answer in (False, True):
        async with connect_as(shelf["tokens"]["cataloguer"], mode, elicitation_callback=confirming(answer)) as client:
            assert client.protocol_version == version
            assert "author_delete_selected" in await tool_names(client)
            result = await client.call_tool("author_delete_selected", {"ids": [lonely]})
        if answer:
            assert result.structured_content == {"action": "delete_selected", "count": 1,
                                                 "messages": ["Successfully deleted 1 author."]}
        else:
            assert result.is_error and result.content[0].text == "Not confirmed: nothing was done."
    assert asked == ["Delete selected authors: 1 author. Go ahead?"] * 2
    async with connect_as(shelf["tokens"]["librarian"], mode) as client:  # may view, not delete
        assert "author_delete_selected" not in await tool_names(client)
        gone = await client.call_tool("author_get", {"id": lonely})
        assert gone.is_error
