"""A DRF viewset as tools, and a model's whole query as a background job (issue 22), on a real
daphne with ``MCP_AUTH=on``, a real Celery worker and the official SDK client in both eras, as
users with different permissions and static tokens: the viewset's permission classes, object
permissions, throttle, filters and serializers decide (tools/library/api.py), and ``book_list_all``
(tools/library/mcp_tools.py) runs in the worker with a progress notification per chunk."""
import json
import os
import time

import pytest
from mcp.shared.exceptions import MCPError

from mcp_transport.testing import ModernClient

from .test_auth import new_token
from .test_toolsets import ERAS, SHELF, shell, tool_names

# asyncio_mode = "auto" runs the async tests; the last one is plain (a blocking client).
pytestmark = [pytest.mark.filterwarnings("ignore:The logging capability is deprecated")]

SHELF_TOOLS = {"shelf_list", "shelf_get", "shelf_create", "shelf_update", "shelf_delete", "shelf_publish"}
USERS = ("reader", "writer", "nobody", "librarian")

#: A reader of its own for each era, that the throttle stops; and 120 public volumes of which
#: every fifth is private, for book_list_all.
MORE = """
from django.contrib.auth.models import Permission, User
from tools.library.models import Author, Book
view = Permission.objects.filter(content_type__app_label="library", codename="view_book")
for mode in ("auto", "legacy"):
    User.objects.create(username=f"{prefix}-hasty-{mode}").user_permissions.add(*view)
author = Author.objects.get(name=f"{prefix} Author")
Book.objects.bulk_create(Book(title=f"{prefix} vol {n:03}", author=author, year=n, public=n % 5 != 0,
                              internal_note="staff eyes only") for n in range(120))
"""


@pytest.fixture(scope="module")
def shelf(server_env):
    prefix = f"drf{os.getpid()}"
    rows = json.loads(shell(server_env, f"import json\nprefix = {prefix!r}\n{SHELF}").strip().splitlines()[-1])
    shell(server_env, f"prefix = {prefix!r}\n{MORE}")
    names = [*USERS, "hasty-auto", "hasty-legacy"]
    tokens = {name: new_token(server_env, f"{prefix}-{name}") for name in names}
    return {"prefix": prefix, "tokens": tokens, **rows}


async def shelf_titles(client, **arguments):
    result = await client.call_tool("shelf_list", arguments)
    assert result.is_error is not True, result.content
    return {item["title"] for item in result.structured_content["items"]}, result.structured_content


@pytest.mark.parametrize("mode, version", ERAS)
async def test_the_viewsets_permission_classes_decide_the_tools(connect_as, shelf, mode, version):
    expected = {"nobody": set(), "reader": {"shelf_list", "shelf_get"}, "writer": SHELF_TOOLS,
                "librarian": {"shelf_list", "shelf_get"}}
    for user, tools in expected.items():
        async with connect_as(shelf["tokens"][user], mode) as client:
            assert client.protocol_version == version
            assert SHELF_TOOLS & await tool_names(client) == tools, user
    async with connect_as(shelf["tokens"]["reader"], mode) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("shelf_delete", {"pk": shelf["public"]})
        assert refused.value.error.code == -32602 and "Unknown tool" in refused.value.error.message


@pytest.mark.parametrize("mode, version", ERAS)
async def test_a_reader_never_sees_a_private_row_or_the_staff_field(connect_as, shelf, mode, version):
    prefix = shelf["prefix"]
    async with connect_as(shelf["tokens"]["reader"], mode) as client:
        seen, page = await shelf_titles(client, search=f"{prefix} public")
        assert seen == {f"{prefix} public"} and "staff eyes only" not in json.dumps(page)
        private, _ = await shelf_titles(client, search=f"{prefix} private")
        assert private == set()
        hidden = await client.call_tool("shelf_get", {"pk": shelf["private"]})
        assert hidden.is_error and hidden.content[0].text == f"No book with pk {shelf['private']!r}."
        public = await client.call_tool("shelf_get", {"pk": shelf["public"]})
        assert public.structured_content["title"] == f"{prefix} public"
        assert "internal_note" not in public.structured_content
    async with connect_as(shelf["tokens"]["librarian"], mode) as client:  # staff
        seen, page = await shelf_titles(client, search=f"{prefix} p")
        assert seen == {f"{prefix} public", f"{prefix} private"}
        assert {item["internal_note"] for item in page["items"]} == {"staff eyes only"}


@pytest.mark.parametrize("mode, version", ERAS)
async def test_writes_are_validated_and_checked_per_row(connect_as, shelf, mode, version):
    title = f"drf-writes{os.getpid()}{mode}"
    async with connect_as(shelf["tokens"]["writer"], mode) as writer:
        invalid = await writer.call_tool("shelf_create", {"title": "", "author": shelf["author"], "year": 3000})
        assert invalid.is_error
        assert invalid.content[0].text == ("Invalid book: title: This field may not be blank.; "
                                           "year: A book from the future? Give the year it was published.")
        made = await writer.call_tool("shelf_create", {"title": title, "author": shelf["author"], "public": False})
        assert made.is_error is not True, made.content
        key = made.structured_content["id"]
        changed = await writer.call_tool("shelf_update", {"pk": key, "year": 2001})
        assert changed.structured_content["year"] == 2001
        published = await writer.call_tool("shelf_publish", {"pk": key})
        assert published.structured_content["public"] is True
    async with connect_as(shelf["tokens"]["reader"], mode) as reader:
        seen, _ = await shelf_titles(reader, search=title)
        assert seen == {title}  # published: the reader sees it now
    async with connect_as(shelf["tokens"]["writer"], mode) as writer:
        deleted = await writer.call_tool("shelf_delete", {"pk": key})
        assert deleted.structured_content == {"deleted": key}
        gone = await writer.call_tool("shelf_get", {"pk": key})
        assert gone.is_error


@pytest.mark.parametrize("mode, version", ERAS)
async def test_the_viewsets_throttle_applies_to_the_caller(connect_as, shelf, mode, version):
    async with connect_as(shelf["tokens"][f"hasty-{mode}"], mode) as client:
        answers = [await client.call_tool("shelf_get", {"pk": shelf["public"]}) for _ in range(21)]
    assert [answer.is_error is True for answer in answers] == [False] * 20 + [True]  # ShelfThrottle: 20 a minute
    assert answers[-1].content[0].text.startswith("Throttled: Request was throttled. Expected available in")
    async with connect_as(shelf["tokens"]["reader"], mode) as client:  # another user's count
        assert (await client.call_tool("shelf_get", {"pk": shelf["public"]})).is_error is not True


# -- book_list_all: a Celery job with progress ------------------------------------------------------

@pytest.mark.parametrize("mode, version", ERAS)
async def test_a_whole_query_runs_as_a_job_with_progress_per_chunk(connect_as, celery_worker, shelf, mode,
                                                                   version):
    prefix = shelf["prefix"]
    progress = []

    async def on_progress(done, total, message):
        progress.append((done, total, message))

    async with connect_as(shelf["tokens"]["reader"], mode) as client:
        assert client.protocol_version == version
        result = await client.call_tool("book_list_all", {"title__icontains": f"{prefix} vol", "ordering": "-year"},
                                        progress_callback=on_progress)
    assert result.is_error is not True, result.content
    whole = result.structured_content
    assert [item["year"] for item in whole["items"]] == [n for n in range(119, -1, -1) if n % 5 != 0]
    assert whole["count"] == 96 and whole["truncated"] is False
    assert "staff eyes only" not in json.dumps(whole)
    assert progress == [(96, 96, "96 of 96 books")]  # 96 rows: one chunk of 100
    progress.clear()
    async with connect_as(shelf["tokens"]["librarian"], mode) as client:  # staff: every row
        result = await client.call_tool("book_list_all", {"title__icontains": f"{prefix} vol"},
                                        progress_callback=on_progress)
    assert result.structured_content["count"] == 120
    assert {item["internal_note"] for item in result.structured_content["items"]} == {"staff eyes only"}
    assert progress == [(100, 120, "100 of 120 books"), (120, 120, "120 of 120 books")]


def test_2026_a_whole_query_is_a_task_of_the_tasks_extension(auth_server, celery_worker, shelf, server_env):
    client = ModernClient(auth_server.url, {"extensions": {"io.modelcontextprotocol/tasks": {}}})
    client.token = shelf["tokens"]["reader"]
    created = client.post("tools/call", {"name": "book_list_all",
                                         "arguments": {"title__icontains": f"{shelf['prefix']} vol"}}).json["result"]
    assert created["resultType"] == "task", created
    deadline = time.monotonic() + 120
    while (task := client.post("tasks/get", {"taskId": created["taskId"]}).json["result"])["status"] == "working":
        assert time.monotonic() < deadline, task
        time.sleep(0.1)
    assert task["status"] == "completed", task
    assert task["result"]["structuredContent"]["count"] == 96
    # The job's row (the admin's progress bar) kept each chunk's progress.
    row = shell(server_env, "from mcp_transport.models import McpJob\n"
                            f"job = McpJob.objects.get(pk={created['taskId']!r})\n"
                            "print(job.progress, job.total, job.message)").strip().splitlines()[-1]
    assert row == "96.0 96.0 96 of 96 books"
