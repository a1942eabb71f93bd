"""Issue 38: every malformed cursor of every paginated method gets -32602 and one sentence, in both
eras ("Invalid cursors SHOULD result in an error with code -32602" -- spec 2025-11-25
server/utilities/pagination).

Before, a ``resources/list`` cursor into the listed rows whose ``"at"`` was an array or an object
holding a ":" reached Django's signer (AttributeError), and a 2025-11-25 ``tasks/list`` cursor
dated ``0001-01-01T00:00:00+23:59`` reached the query (OverflowError once in UTC): -32603 and a
4 KB traceback in the log. Cursors are now read in one place (protocol/list_cursors.py), each
method checking the shape it writes, before anything of it is used.

Against a real daphne with ``MCP_AUTH=on``, as a user who may view books, so ``resources/list``
goes on into the rows of ``django://library.book/{pk}`` (the only cursor whose reader is a lister).
"""
import base64
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mcp_transport.testing import HttpClient, ModernClient

from .test_answers_only_to_questions_asked import shell
from .test_auth import new_token

ROWS = "django://library.book/{pk}"
NOT_ISSUED = "The cursor is not one this server issued."
SKILL_DIRECTORY = "skill://library-catalog/references"
#: Every paginated method, with the params it needs besides the cursor.
LISTS = {"tools/list": {}, "resources/list": {}, "resources/templates/list": {}, "prompts/list": {},
         "skills/list": {}, "resources/directory/read": {"uri": SKILL_DIRECTORY}}
LEGACY_ONLY = {"tasks/list": {}}


def cursor_of(value) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode()


#: (what it is, the cursor): made up, or of the right form with a value it never holds.
MALFORMED = [
    ("rows at an array holding a colon", cursor_of({"rows": ROWS, "at": [":"]})),
    ("rows at an object holding a colon", cursor_of({"rows": ROWS, "at": {":": 1}})),
    ("rows at an array", cursor_of({"rows": ROWS, "at": [1, 2]})),
    ("rows at a number", cursor_of({"rows": ROWS, "at": 7})),
    ("rows at a forged string", cursor_of({"rows": ROWS, "at": "a:b:c"})),
    ("rows without at", cursor_of({"rows": ROWS})),
    ("rows of no template", cursor_of({"rows": "django://no.such/{pk}", "at": None})),
    ("rows naming an array", cursor_of({"rows": [ROWS], "at": None})),
    ("a task before year 1 in UTC", cursor_of(["0001-01-01T00:00:00+23:59", "A" * 32])),
    ("a task after year 9999 in UTC", cursor_of(["9999-12-31T23:59:59-23:59", "A" * 32])),
    ("a task without an offset", cursor_of(["2020-01-01T00:00:00", "A" * 32])),
    ("a task id with a NUL", cursor_of(["2020-01-01T00:00:00+00:00", "A" * 31 + "\x00"])),
    ("a task id that is a number", cursor_of(["2020-01-01T00:00:00+00:00", 12])),
    ("a date that is not one", cursor_of(["yesterday", "A" * 32])),
    ("three items", cursor_of(["2020-01-01T00:00:00+00:00", "A" * 32, 1])),
    ("after a number", cursor_of({"after": 3})),
    ("after null", cursor_of({"after": None})),
    ("JSON null", cursor_of(None)),
    ("deep nesting", base64.urlsafe_b64encode(b"[" * 5_000).decode()),
    ("not base64", "%%%"),
    ("base64 of no JSON", base64.urlsafe_b64encode(b"\xff\xfe").decode()),
    ("an empty string", ""),
]
#: Cursors that are not strings (the params are JSON: anything may come).
NOT_STRINGS = [("a number", 5), ("an array", ["x"]), ("an object", {"after": "x"}), ("true", True)]


@pytest.fixture(scope="module")
def reader(auth_server, server_env):
    """A user who may view books (and so lists their rows), with a book to list."""
    prefix = f"cursors{os.getpid()}"
    shell(server_env, f"""
from django.contrib.auth.models import Permission, User
from tools.library.models import Author, Book
user = User.objects.create(username="{prefix}-reader")
user.user_permissions.add(*Permission.objects.filter(content_type__app_label="library", codename="view_book"))
Book.objects.create(title="{prefix}", author=Author.objects.create(name="{prefix}"), year=2000, owner=user)
print("ok")""")
    return new_token(server_env, f"{prefix}-reader")


class Modern(ModernClient):
    def __init__(self, url, token):
        super().__init__(url, {})
        self.token = token

    def ask(self, method, params):
        reply = self.post(method, params, headers={"Authorization": f"Bearer {self.token}"})
        return reply.json


class Legacy(HttpClient):
    def ask(self, method, params):
        return self.call(method, params)


@pytest.fixture(scope="module")
def clients(auth_server, reader):
    legacy = Legacy(auth_server.url, token=reader)
    legacy.initialize(capabilities={})
    return {"2026-07-28": (Modern(auth_server.url, reader), LISTS),
            "2025-11-25": (legacy, {**LISTS, **LEGACY_ONLY})}


def refused(reply) -> bool:
    return "error" in reply and reply["error"]["code"] == -32602 and reply["error"]["message"] == NOT_ISSUED


def test_the_rows_are_listed_and_their_cursor_is_honoured(clients):
    """The lister is reached: the rows' own cursors are the ones under test."""
    for client, _methods in clients.values():
        cursor = None
        for _page in range(100):
            page = client.ask("resources/list", {"cursor": cursor} if cursor else {})["result"]
            if any(entry["uri"].startswith("django://library.book/") for entry in page["resources"]):
                break
            cursor = page["nextCursor"]
        else:
            pytest.fail("no rows listed")


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
@pytest.mark.parametrize("what, cursor", MALFORMED + NOT_STRINGS, ids=[w for w, _ in MALFORMED + NOT_STRINGS])
def test_every_malformed_cursor_of_every_list_is_minus_32602(clients, era, what, cursor):
    client, methods = clients[era]
    for method, params in methods.items():
        reply = client.ask(method, {**params, "cursor": cursor})
        assert refused(reply), (method, what, reply)


#: Texts: any, and those a cursor's readers once tripped on (Django's signer splits at ":", a
#: database refuses a NUL, a moment may leave years 1..9999 once in UTC).
TEXT = st.text(max_size=12) | st.sampled_from([":", "a:b:c", "x" * 32 + ":", "\x00", "A" * 31 + "\x00", "A" * 32,
                                                "0001-01-01T00:00:00+23:59", "9999-12-31T23:59:59-23:59"])
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
                    lambda children: st.lists(children, max_size=3) | st.dictionaries(TEXT, children,
                                                                                      max_size=3), max_leaves=8)
#: A cursor's value: the form of one of the three this server writes with anything in it, or anything.
MOMENTS = st.datetimes(timezones=st.none() | st.timezones()).map(lambda moment: moment.isoformat())
VALUES = st.one_of(st.builds(lambda at: {"rows": ROWS, "at": at}, JSON), st.builds(lambda a: {"after": a}, JSON),
                   st.builds(lambda c, j: [c, j], MOMENTS | JSON, TEXT | JSON), JSON)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=VALUES, era=st.sampled_from(["2026-07-28", "2025-11-25"]))
def test_no_cursor_value_gets_anything_but_a_page_or_minus_32602(clients, value, era):
    client, methods = clients[era]
    for method, params in methods.items():
        reply = client.ask(method, {**params, "cursor": cursor_of(value)})
        assert "result" in reply or refused(reply), (method, value, reply)


def test_the_server_logged_no_traceback(auth_server, clients):
    test_every_malformed_cursor_of_every_list_is_minus_32602(clients, "2025-11-25", *MALFORMED[0])
    assert "Traceback" not in auth_server.log()
