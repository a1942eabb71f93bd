"""The calls log as an audit trail (issue 30, class 3), without I/O: which calls change state
(running/audit.py), that those are recorded whatever the sample and the cap, that the cap of
the others is each caller's own, that a full backlog drops them last, and what a row keeps of a
call's arguments.

Before: one cap for the whole process (a flood of echo calls left 1 of 10 of staff's
``book_update`` calls recorded, and a writer keeping echo calls going hid its own writes), the
sample applied to writes too, and a row kept no arguments."""
from collections import OrderedDict
from types import SimpleNamespace

import pytest
from django.conf import settings
from django.test import override_settings

from mcp_transport.auth import Principal
from mcp_transport.methods.dispatch import Call
from mcp_transport.methods.registry import make_tool, registry
from mcp_transport.protocol.jsonrpc import Request
from mcp_transport.running import calls
from mcp_transport.state import quotas
from mcp_transport.state import metrics, sessions

OK = {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}
REFUSED = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "Unknown tool: book_update."}}


def call(principal="", address="", session_id=""):
    session = sessions.SessionRecord(id=session_id, protocol_version="2026-07-28", state="ready")
    return Call(session=session, principal=Principal(key=principal) if principal else None, address=address)


def tool_call(name, **arguments):
    return Request(id=1, method="tools/call", params={"name": name, "arguments": arguments})


@pytest.fixture
def tools(monkeypatch):
    """Tools of each kind, besides the example project's (its toolsets set the hints per action)."""
    def plain():
        return "x"
    for name, annotations in (("reads", {"readOnlyHint": True}), ("unmarked", None),
                              ("says_it_writes", {"readOnlyHint": False}), ("only_idempotent", {"idempotentHint": True})):
        monkeypatch.setitem(registry.tools, name, make_tool(plain, name=name, annotations=annotations))


@pytest.fixture
def recorded(monkeypatch):
    """What ``finished`` queues (for the next batch, or the audit trail's next write), with a cap
    of 3 rows a second per caller and a fixed second."""
    added = []
    monkeypatch.setattr(calls, "add", added.append)
    monkeypatch.setattr(calls, "trail", lambda: SimpleNamespace(write=added.append))
    monkeypatch.setattr(calls, "_callers", OrderedDict(), raising=False)
    monkeypatch.setattr(calls.time, "monotonic", lambda: 1000.5)
    with override_settings(MCP_TRANSPORT={**settings.MCP_TRANSPORT, "CALL_LOG_MAX_PER_SECOND": 3}):
        yield added


def test_a_call_changes_state_unless_its_tool_is_marked_read_only_or_it_was_refused(tools):
    from mcp_transport.running import audit

    assert not audit.changes_state(tool_call("reads"), OK)
    for name in ("unmarked", "says_it_writes", "only_idempotent"):  # only readOnlyHint: true says "reads"
        assert audit.changes_state(tool_call(name), OK), name
    # The example project's toolsets: a ModelToolset, an admin (its actions too), a DRF viewset.
    for name in ("book_create", "book_update", "book_delete", "author_create", "author_delete_selected",
                 "author_clear_country", "shelf_create", "shelf_update", "shelf_delete", "shelf_publish"):
        assert audit.changes_state(tool_call(name), OK), name
    for name in ("book_list", "book_get", "book_list_all", "author_list", "shelf_list", "echo", "no_such_tool"):
        assert not audit.changes_state(tool_call(name), OK), name
    # Whatever its outcome once it ran (a tool error, a failure, a cancel, a job) ...
    for message in ({"jsonrpc": "2.0", "id": 1, "result": {"isError": True, "content": []}},
                    {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "Internal error."}}, None):
        assert audit.changes_state(tool_call("book_update"), message)
    # ... but a call refused before it ran (unknown to its caller, bad task, 403, 429) changed nothing.
    assert not audit.changes_state(tool_call("book_update"), REFUSED)
    for method, params in (("tools/list", {}), ("resources/read", {"uri": "django://library.book/1"}),
                           ("prompts/get", {"name": "greet"}), ("ping", {}), ("initialize", {}),
                           ("tasks/get", {"taskId": "t"}), ("tools/call", ["not", "an", "object"])):
        assert not audit.changes_state(Request(id=1, method=method, params=params), OK), method



def test_a_cancel_or_update_is_audited_only_when_its_handler_says_it_changed_something():
    """Issue 38: a no-op tasks/cancel or tasks/update of one's own finished task was recorded as a
    state-changing row, never sampled or capped (613 rows/s from one client)."""
    from mcp_transport.running import audit

    failed = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "Internal error."}}
    for method in ("tasks/cancel", "tasks/update"):
        request = Request(id=1, method=method, params={"taskId": "t"})
        assert audit.changes_state(request, OK, changed=True), method  # it stopped or steered its task
        assert not audit.changes_state(request, OK, changed=False), method  # its task had ended: no-op
        assert not audit.changes_state(request, OK), method  # its handler said nothing
        assert audit.changes_state(request, failed), method  # a failure may have come after a change
        assert not audit.changes_state(request, REFUSED, changed=True), method
    assert not audit.changes_state(tool_call("book_update"), OK, changed=False)  # a handler may say so of any call


def test_a_no_op_cancel_is_one_of_its_callers_sampled_and_capped_calls(recorded):
    cancel = Request(id=1, method="tasks/cancel", params={"taskId": "t"})
    for _ in range(10):
        noop = call("user:1")
        noop.changed = False
        calls.finished(cancel, noop, OK)
    assert len(recorded) == 3 and not any(row[-1] for row in recorded)  # within the cap of 3: not audited


def test_every_state_changing_call_is_recorded_whatever_the_sample_and_the_cap(tools, recorded):
    with override_settings(MCP_TRANSPORT={**settings.MCP_TRANSPORT, "CALL_LOG_SAMPLE": 0,
                                          "CALL_LOG_MAX_PER_SECOND": 1}):
        for _ in range(20):
            calls.finished(tool_call("book_update", id=1), call("user:1"), OK)
            calls.finished(tool_call("echo"), call("user:1"), OK)
    assert [row[2].params["name"] for row in recorded] == ["book_update"] * 20
    assert all(row[-1] is True for row in recorded)  # the captured call says it changes state


def test_one_callers_flood_spends_its_own_share_only(tools, recorded):
    """The staff's book_update (a write) and book_get (a read) are recorded while another caller
    floods echo calls in the same second; the flooder's own writes too."""
    skipped = metrics._pending["calls_log_skipped"]
    flooder, staff = call("user:2"), call("user:1")
    for index in range(100):
        calls.finished(tool_call("echo"), flooder, OK)
        if index % 10 == 0:
            calls.finished(tool_call("book_update", id=5), staff, OK)
        if index % 40 == 0:
            calls.finished(tool_call("book_get", id=5), staff, OK)
        if index % 25 == 0:
            calls.finished(tool_call("book_update", id=9), flooder, OK)
    kept = [(row[4].key, row[2].params["name"]) for row in recorded]
    assert kept.count(("user:1", "book_update")) == 10 and kept.count(("user:2", "book_update")) == 4
    assert kept.count(("user:1", "book_get")) == 3 and kept.count(("user:2", "echo")) == 3
    assert metrics._pending["calls_log_skipped"] == skipped + 97
    # Without a principal, the client address is the caller: two addresses, two shares.
    for address in ("10.0.0.1", "10.0.0.2"):
        for _ in range(5):
            calls.finished(tool_call("echo"), call(address=address), OK)
    assert sum(row[4] is None for row in recorded) == 6


def test_the_counts_per_caller_are_bounded(recorded, monkeypatch):
    monkeypatch.setattr(calls, "CALLERS_REMEMBERED", 3)
    for index in range(10):
        calls.finished(Request(id=1, method="ping", params={}), call(address=f"10.0.0.{index}"), OK)
    assert list(calls._callers) == [quotas.caller_key("", f"10.0.0.{index}") for index in (7, 8, 9)]
    calls.finished(Request(id=1, method="ping", params={}), call(address="10.0.0.8"), OK)
    assert list(calls._callers)[-1] == quotas.caller_key("", "10.0.0.8")  # the least recently seen goes first
    assert len(recorded) == 11


async def test_a_full_backlog_drops_read_only_rows_before_state_changing_ones(monkeypatch, caplog):
    """A database outage fills the backlog (MAX_WAITING): a write takes the oldest read's place;
    only a backlog of writes alone drops a write."""
    write, read = ("w", True), ("r", False)
    monkeypatch.setattr(calls, "MAX_WAITING", 4)
    monkeypatch.setattr(calls, "_waiting", [read, write, read, write])
    monkeypatch.setattr(calls, "_writes_before", 0)
    monkeypatch.setattr(calls, "_writes_lost", 0)
    monkeypatch.setattr(calls, "_task", None)
    monkeypatch.setattr(calls, "_full", None)
    dropped, writes_dropped = metrics._pending["calls_log_dropped"], metrics._pending["calls_log_writes_dropped"]
    monkeypatch.setattr(calls, "_run", _idle)  # no writer: the database is down
    calls.add(("new read", False))
    assert calls._waiting == [read, write, read, write]
    calls.add(("w2", True))
    calls.add(("w3", True))
    assert calls._waiting == [write, write, ("w2", True), ("w3", True)]
    calls.add(("w4", True))
    assert calls._waiting == [write, write, ("w2", True), ("w3", True)]
    assert metrics._pending["calls_log_dropped"] == dropped + 4
    assert metrics._pending["calls_log_writes_dropped"] == writes_dropped + 1
    monkeypatch.setattr(calls, "_write", lambda rows: None)  # back: the next write says what was lost
    await calls.flush()
    assert "1 rows of state-changing calls were not recorded" in caplog.text and calls._writes_lost == 0


async def test_rows_put_back_after_a_failed_write_drop_reads_first(monkeypatch):
    from django.db import OperationalError

    def down(rows):
        calls._waiting.extend([("late write", True), ("late read", False)])  # arrived meanwhile
        raise OperationalError("the database is away")

    monkeypatch.setattr(calls, "MAX_WAITING", 3)
    monkeypatch.setattr(calls, "_write", down)
    monkeypatch.setattr(calls, "_waiting", [("r1", False), ("w1", True), ("r2", False)])
    await calls.flush()
    assert calls._waiting == [("w1", True), ("late write", True), ("late read", False)]  # the oldest reads go


async def _idle():
    pass


def test_a_row_keeps_its_arguments_redacted_its_address_and_whether_it_changes_state(tools):
    from mcp_transport.running import audit

    arguments = {"id": 42, "title": "The Secret Garden", "public": True, "author": None, "tags": ["a", "b"],
                 "data": {"year": 1911}, "password": "hunter2", "api_key": "k", "access_token": "t",
                 "session": "s", "pin": 1234, "year": 1911, "rating": 4.5}
    row = calls.row(tool_call("book_update", **arguments), call("user:1", "10.1.2.3"), OK)
    assert row["changes_state"] is True and row["client_address"] == "10.1.2.3" and row["principal"] == "user:1"
    assert row["arguments"] == {
        "id": 42, "title": "<str: 17 chars>", "public": True, "author": None, "tags": "<list: 2 items>",
        "data": "<object: 1 key>", "password": "<redacted>", "api_key": "<redacted>", "access_token": "<redacted>",
        "session": "<redacted>", "pin": "<redacted>", "year": "<int>", "rating": "<float>"}
    assert "hunter2" not in repr(row)
    kept = frozenset({"ids", "slug", "token", "big", "nan", "long"})
    assert audit.redacted({"ids": [1, 2, "3"], "slug": "a\x00b", "token": "x", "big": 10 ** 30,
                           "nan": float("nan"), "long": "x" * 101}, kept) == {
        "ids": [1, 2, "3"], "slug": "a\ufffdb", "token": "<redacted>", "big": "<int>", "nan": "<float>",
        "long": "<str: 101 chars>"}
    many = audit.redacted({f"a{index}": index for index in range(60)}, frozenset())
    assert len(many) == audit.MAX_NAMES + 1 and many["…"] == "<10 more arguments>"
    assert audit.redacted(["not", "an", "object"], frozenset()) == "<list: 3 items>"
    assert audit.redacted({"x" * 100 + "\ud800": 1}, frozenset()) == {"x" * 64: "<int>"}
    read = calls.row(tool_call("book_get", id=1), call(address="10.1.2.3"), OK)
    assert read["changes_state"] is False and read["arguments"] == {"id": 1}
    assert calls.row(Request(id=1, method="tools/list", params={}), call(), OK)["arguments"] is None
    with override_settings(MCP_TRANSPORT={**settings.MCP_TRANSPORT, "CALL_LOG_ARGUMENTS_KEPT": ["title"]}):
        assert calls.row(tool_call("book_update", id=1, title="Emma"), call(), OK)["arguments"] == {
            "id": "<int>", "title": "Emma"}


@pytest.mark.parametrize("value, good", [(["id", "uuid"], True), (("pk",), True), ([], True), ("id", False),
                                         ([1], False), (None, False)])
def test_the_kept_arguments_setting_is_a_list_of_names(value, good):
    from mcp_transport import checks

    with override_settings(MCP_TRANSPORT={**settings.MCP_TRANSPORT, "CALL_LOG_ARGUMENTS_KEPT": value}):
        messages = checks.values_check(None)
    assert [message.id for message in messages] == ([] if good else ["mcp_transport.E004"])
