"""SEP-2694 on the wire (protocol/task_streams.py): the cursor, the event envelope, what each
entry of a task's job stream is as an event."""
import pytest

from mcp_transport.protocol import task_streams
from mcp_transport.protocol.errors import InvalidParams
from mcp_transport.protocol.jsonrpc import notification_message, request_message, result_message


@pytest.mark.parametrize("params, cursor", [({}, None), ({"after": None}, None), ({"after": 0}, 0),
                                            ({"after": 41}, 41), ({"after": 3.0}, 3)])
def test_after_is_an_optional_non_negative_integer(params, cursor):
    assert task_streams.after(params) == cursor


@pytest.mark.parametrize("value", [-1, 1.5, "2", True, False, [], {}, float("nan")])
def test_any_other_after_is_invalid_params(value):
    """"Receivers MUST return -32602 (Invalid params) if after is negative, not an integer"."""
    with pytest.raises(InvalidParams) as refused:
        task_streams.after({"after": value})
    assert refused.value.code == -32602 and refused.value.message.startswith('"after" must be')


def test_a_cursor_past_the_last_event_names_it():
    assert "last event so far is 4" in task_streams.past_the_end(9, 4).message
    assert "sent no event yet" in task_streams.past_the_end(0, -1).message


def test_the_event_envelope_carries_the_related_task():
    message = task_streams.event("t1", 3, task_streams.STATUS, {"status": "working"})
    assert message == {"jsonrpc": "2.0", "method": "notifications/tasks/event",
                       "params": {"seq": 3, "taskId": "t1", "type": "django-mcp-transport.status",
                                  "payload": {"status": "working"},
                                  "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t1"}}}}


def test_every_type_is_vendor_prefixed():
    """"Implementations MUST NOT emit unprefixed event types"."""
    assert all(kind.startswith(task_streams.VENDOR + ".") for kind in task_streams.TYPES)


def test_events_gone_is_32010_with_its_reason():
    gone = task_streams.events_gone("t1")
    assert gone.code == -32010 and gone.http_status == 200
    assert gone.data == {"reason": "events_gone", "taskId": "t1"}


def test_what_each_stored_entry_is_as_an_event():
    opening = task_streams.opening("t1")
    assert task_streams.is_opening(opening)
    assert task_streams.event_of(opening, False) == (task_streams.STATUS, {"status": "working"})
    progress = notification_message("notifications/progress", {"progressToken": "p", "progress": 1})
    assert task_streams.event_of(progress, False) == (task_streams.NOTIFICATION, {
        "method": "notifications/progress", "params": {"progressToken": "p", "progress": 1}})
    question = request_message(7, "elicitation/create",
                               task_streams.with_input_key({"message": "Go?", "_meta": {"a": 1}}, "confirm"))
    assert task_streams.event_of(question, False) == (task_streams.INPUT_REQUEST, {"inputRequests": {
        "confirm": {"method": "elicitation/create", "params": {"message": "Go?", "_meta": {"a": 1}}}}})
    end = {"status": "failed", "statusMessage": "It broke."}
    assert task_streams.event_of(None, True, end) == (task_streams.STATUS, end)
    assert task_streams.event_of(None, False) is None  # a priming event
    assert task_streams.event_of(result_message(1, {}), False) is None
