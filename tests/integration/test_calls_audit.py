"""The calls log as an audit trail that cannot be crowded out (issue 30, class 3), on a real daphne
with ``MCP_AUTH=on`` and the run's database (PostgreSQL on CI), in both eras: while one ordinary
account floods echo calls (2026-07-28 requests and a 2025-11-25 session), another's ``book_update``
calls, and the flooder's own, are all recorded with who, what and redacted arguments, and the
other's few read-only calls keep their own share of ``CALL_LOG_MAX_PER_SECOND``.

Before: the cap was one for the whole process, so the flood spent it and most writes went
unrecorded (the victim's and the flooder's alike).
"""
import json
import os
import re
import threading
import time

import pytest

from mcp_transport.testing import HttpClient, ModernClient

from .test_admin import Admin
from .test_auth import new_token
from .test_toolsets import shell
from .waiting import eventually

#: A small cap, so that a flood of a few threads spends it early in every second.
CAP = 3

PEOPLE = """
from django.contrib.auth.models import Permission, User
from tools.library.models import Author, Book
perms = Permission.objects.filter(content_type__app_label="library",
                                  codename__in=("view_book", "change_book"))
staff = User.objects.create(username=f"{prefix}-staff", is_staff=True)
flooder = User.objects.create(username=f"{prefix}-flooder")
for user in (staff, flooder):
    user.user_permissions.add(*perms)
author = Author.objects.create(name=f"{prefix} Author")
shared = Book.objects.create(title=f"{prefix} shared", author=author, year=2000)
own = Book.objects.create(title=f"{prefix} own", author=author, year=2001, owner=flooder)
print(json.dumps({"shared": shared.pk, "own": own.pk}))
"""

ROWS = """
from mcp_transport.models import McpCall
rows = McpCall.objects.filter(request_id__startswith=tag)
print(json.dumps([{"request_id": row.request_id, "principal": row.principal, "target": row.target,
                   "status": row.status, "arguments": row.arguments, "changes_state": row.changes_state}
                  for row in rows]))
"""


@pytest.fixture(scope="module")
def audited_server(start_server):
    return start_server(MCP_AUTH="on", MCP_TRANSPORT_JSON=json.dumps({"CALL_LOG_MAX_PER_SECOND": CAP}))


@pytest.fixture(scope="module")
def people(server_env):
    prefix = f"audit{os.getpid()}"
    books = json.loads(shell(server_env, f"import json\nprefix = {prefix!r}\n{PEOPLE}").strip().splitlines()[-1])
    tokens = {name: new_token(server_env, f"{prefix}-{name}") for name in ("staff", "flooder")}
    return {"prefix": prefix, "tokens": tokens, **books}


def answer(stream, request_id) -> dict:
    """The answer of a POST: its JSON, or the one response on its SSE stream."""
    if stream.headers.get("content-type", "").startswith("text/event-stream"):
        responses = [m for m in stream.messages(timeout=30) if m.get("id") == request_id and "method" not in m]
        assert len(responses) == 1, responses
        return responses[0]
    body = stream.response.read()
    stream.connection.close()
    assert stream.status == 200, (stream.status, body)
    return json.loads(body)


class Caller:
    """One account's clients of both eras: a 2025-11-25 session and 2026-07-28 requests."""

    def __init__(self, server, token):
        self.legacy = HttpClient(server.url, token=token)
        self.legacy.initialize()
        self.modern = ModernClient(server.url)
        self.modern.token = token

    def call(self, era, name, arguments, request_id) -> dict:
        params = {"name": name, "arguments": arguments}
        if era == "2025-11-25":
            stream = self.legacy.stream("POST", self.legacy.message("tools/call", params, request_id=request_id))
        else:
            stream = self.modern.open("tools/call", params, request_id=request_id)
        reply = answer(stream, request_id)
        assert "result" in reply and reply["result"].get("isError") is not True, reply
        return reply["result"]


def flood(server, token, era, stop: threading.Event, sent: list):
    caller = Caller(server, token)
    while not stop.is_set():
        caller.call(era, "echo", {"text": "flood"}, request_id=f"flood-{time.monotonic_ns()}")
        sent.append(1)


def recorded(server_env, tag) -> list:
    return json.loads(shell(server_env, f"import json\ntag = {tag!r}\n{ROWS}").strip().splitlines()[-1])


ERAS = ("2025-11-25", "2026-07-28")
CALLS = "/admin/mcp_transport/mcpcall/"


def during_a_flood(server, people, tag) -> tuple:
    """The staff's writes and reads, and the flooder's own writes, in both eras, while the
    flooder's four threads (two per era) send echo calls: (request ids by kind, flood calls)."""
    staff = Caller(server, people["tokens"]["staff"])
    flooder = Caller(server, people["tokens"]["flooder"])
    stop, sent, ids = threading.Event(), [], {"staff writes": [], "flooder writes": [], "staff reads": []}
    threads = [threading.Thread(target=flood, args=(server, people["tokens"]["flooder"], era, stop, sent))
               for era in ERAS + ERAS]
    for thread in threads:
        thread.start()
    try:
        eventually(lambda: _flooding(sent), deadline=30)
        for round_ in range(5):
            for era in ERAS:
                ids["staff writes"].append(f"{tag}-staff-write-{era}-{round_}")
                staff.call(era, "book_update", {"id": people["shared"], "title": f"{people['prefix']} v{round_}"},
                           ids["staff writes"][-1])
                if round_ < 3:
                    ids["flooder writes"].append(f"{tag}-flooder-write-{era}-{round_}")
                    flooder.call(era, "book_update", {"id": people["own"], "year": 2001 + round_},
                                 ids["flooder writes"][-1])
            for era in ERAS:  # the staff's own reads: within its share (CAP a second) while the flood runs
                ids["staff reads"].append(f"{tag}-staff-read-{era}-{round_}")
                staff.call(era, "book_get", {"id": people["shared"]}, ids["staff reads"][-1])
            time.sleep(1.0)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    time.sleep(1.1)  # a second of its own: the marker is within the staff's share whatever the rule
    staff.call("2026-07-28", "book_get", {"id": people["shared"]}, f"{tag}-marker")
    return ids, len(sent)


@pytest.fixture(scope="module")
def flooded(audited_server, server_env, people):
    """The rows recorded of ``during_a_flood``'s calls, by request id, and the request ids."""
    tag = f"audit-{time.monotonic_ns()}"
    ids, flood_calls = during_a_flood(audited_server, people, tag)
    # Rows are written in the order they were queued: once the marker's is in, every earlier one is.
    rows = eventually(lambda: _with_marker(recorded(server_env, tag), f"{tag}-marker"), deadline=60)
    by_id = {row["request_id"]: row for row in rows}
    figures = {kind: f"{sum(i in by_id for i in request_ids)} of {len(request_ids)}"
               for kind, request_ids in ids.items()}
    print("recorded while the flood ran:", {**figures, "flood calls": flood_calls})
    return by_id, ids, figures


def test_a_flood_of_echo_calls_hides_no_write_and_spends_only_its_own_share(flooded):
    by_id, ids, figures = flooded
    assert all(request_id in by_id for request_id in ids["staff writes"] + ids["flooder writes"]), figures
    assert all(request_id in by_id for request_id in ids["staff reads"]), figures


def test_a_write_says_who_what_with_its_arguments_redacted_and_the_admin_shows_it(flooded, people,
                                                                                  audited_server, admin_login):
    by_id, ids, _ = flooded
    staff_row, read = by_id[ids["staff writes"][0]], by_id[ids["staff reads"][0]]
    assert staff_row["principal"] and staff_row["target"] == "book_update" and staff_row["status"] == "ok"
    assert by_id[ids["flooder writes"][0]]["principal"] not in ("", staff_row["principal"])
    assert staff_row["changes_state"] is True and read["changes_state"] is False
    # Redacted: the row's key kept (CALL_LOG_ARGUMENTS_KEPT), the new title only as its type and length.
    title = f"{people['prefix']} v0"
    assert staff_row["arguments"] == {"id": people["shared"], "title": f"<str: {len(title)} chars>"}, staff_row
    # The admin: the "state-changing" filter is the audit trail, and a call's page shows its arguments.
    admin = Admin(audited_server, admin_login)
    assert admin.page(CALLS, q=ids["staff reads"][0], changes_state__exact=1).count('class="field-started"') == 0
    listed = admin.page(CALLS, q=ids["staff writes"][0], changes_state__exact=1)
    assert listed.count('class="field-started"') == 1
    page = admin.page(re.search(r'href="(/admin/mcp_transport/mcpcall/\d+/change/)', listed).group(1))
    assert f"&lt;str: {len(title)} chars&gt;" in page and title not in page and "State-changing" in page


def _flooding(sent):
    assert len(sent) > 50, "the flood has not started yet"


def _with_marker(rows, marker):
    assert any(row["request_id"] == marker for row in rows), "the marker's row is not written yet"
    return rows
