"""Issue 30, class 6: text no database stores (NUL, which PostgreSQL refuses in text; a lone
surrogate, which no database takes) in what a toolset passes to the database -- a search, a
filter, a write's fields, an admin's search and writes, a DRF viewset's search, a background
list's arguments -- is refused before any query with -32602 and one sentence naming the argument,
and the server logs no traceback for it; in both eras, on the run's database (PostgreSQL in CI)."""
import json
import os
import re

import pytest

from mcp_transport.testing import HttpClient, ModernClient

from .test_auth import new_token
from .test_toolsets import shell

SETUP = """
from django.contrib.auth.models import Permission, User
from tools.library.models import Author, Book
user = User.objects.create(username=f"{prefix}-clerk")
user.user_permissions.add(*Permission.objects.filter(content_type__app_label="library", codename__in=(
    "view_book", "add_book", "change_book", "view_author", "add_author")))
author = Author.objects.create(name=f"{prefix} Author")
book = Book.objects.create(title=f"{prefix} book", author=author, year=2000, owner=user)
print(json.dumps({"author": author.pk, "book": book.pk}))
"""

NUL, SURROGATE = "\u0000", "\ud800"


@pytest.fixture(scope="module")
def clerk(start_server, server_env):
    prefix = f"badtext{os.getpid()}"
    rows = json.loads(shell(server_env, f"import json\nprefix = {prefix!r}\n{SETUP}").strip().splitlines()[-1])
    server = start_server(MCP_AUTH="on")
    return server, new_token(server_env, f"{prefix}-clerk"), rows


def calls(rows):
    """(tool, arguments, the argument the error names) of every way a toolset reaches the database."""
    return [
        ("book_list", {"search": f"tolkien{NUL}"}, "search"),
        ("book_list", {"title__icontains": NUL}, "title__icontains"),
        ("book_list", {"ordering": f"title{NUL}"}, "ordering"),
        ("book_list_all", {"title__icontains": f"a{NUL}b"}, "title__icontains"),
        ("book_create", {"title": f"new{NUL}", "author": rows["author"], "year": 2001}, "title"),
        ("book_update", {"id": rows["book"], "title": f"changed{NUL}"}, "title"),
        ("author_list", {"search": NUL}, "search"),
        ("author_create", {"name": f"{NUL}name"}, "name"),
        ("shelf_list", {"search": f"a{NUL}"}, "search"),
        ("shelf_list", {"genre": NUL}, "genre"),
    ]


def assert_refused(error, tool, argument):
    assert error is not None, f"{tool} was not refused"
    assert error["code"] == -32602, (tool, error)
    message = error["message"]
    assert re.fullmatch(r"[^.]+\.", message), message  # one sentence
    assert tool in message and f"{argument} " in message, message
    assert NUL not in message


def assert_no_traceback(server):
    log = server.log()
    assert "Traceback" not in log and "DataError" not in log, log[-3000:]


def test_a_session_gets_invalid_params_and_the_log_no_traceback(clerk):
    server, token, rows = clerk
    client = HttpClient(server.url, token=token)
    client.initialize()
    for tool, arguments, argument in calls(rows):
        answer = client.call("tools/call", {"name": tool, "arguments": arguments})
        assert_refused(answer.get("error"), tool, argument)
    # A lone surrogate never reaches a tool: JSON text escaping one is no UTF-8 (jsonrpc.parse).
    body = json.dumps(client.message("tools/call", {"name": "book_list", "arguments": {"search": SURROGATE}}))
    refused = client.request("POST", body.encode())
    assert refused.status == 400 and refused.json["error"]["code"] == -32700, refused.body
    assert_no_traceback(server)


def test_a_2026_request_gets_invalid_params_and_the_log_no_traceback(clerk):
    server, token, rows = clerk
    client = ModernClient(server.url)
    client.token = token
    for tool, arguments, argument in calls(rows):
        reply = client.post("tools/call", {"name": tool, "arguments": arguments}, timeout=20)
        assert_refused(reply.json.get("error"), tool, argument)
    assert_no_traceback(server)


def test_the_rule_holds_for_what_is_valid_text(clerk):
    """Astral characters (a surrogate pair in JSON) and other control characters are text: they
    reach the query."""
    server, token, rows = clerk
    client = ModernClient(server.url)
    client.token = token
    for search in ("\U0001f600", "zq\tzq", "\x01", "\x7f"):
        reply = client.post("tools/call", {"name": "book_list", "arguments": {"search": search}})
        assert reply.json["result"]["structuredContent"]["items"] == [], reply.json
    assert_no_traceback(server)
