"""protocol/tasks_extension.py: negotiation and the wire shapes of the 2026 tasks extension."""
from mcp_transport.protocol import tasks_extension as ext

VIEW = ext.task("t1", "completed", "2026-12-01T00:00:00Z", "2026-12-01T00:00:01Z", 60000, 1000)


def test_the_extension_is_declared_per_request_under_extensions():
    assert ext.declared({"extensions": {ext.EXTENSION: {}}})
    assert not ext.declared({"tasks": {}}) and not ext.declared({}) and not ext.declared(None)
    assert not ext.declared({"extensions": [ext.EXTENSION]})


def test_missing_capability_data_names_the_extension():
    assert ext.required_capabilities() == {"requiredCapabilities": {"extensions": {ext.EXTENSION: {}}}}


def test_task_fields_are_flat_with_integer_milliseconds():
    assert VIEW == {"taskId": "t1", "status": "completed", "createdAt": "2026-12-01T00:00:00Z",
                    "lastUpdatedAt": "2026-12-01T00:00:01Z", "ttlMs": 60000, "pollIntervalMs": 1000}
    created = ext.create_task_result(VIEW)
    assert created["resultType"] == "task" and "task" not in created and "ttl" not in created


def test_queued_is_working_and_a_tool_error_is_completed():
    assert ext.wire_status("queued", False) == "working"
    assert ext.wire_status("failed", False) == "completed"
    assert ext.wire_status("failed", True) == "failed"
    assert ext.wire_status("input_required", False) == "input_required"


def test_detailed_task_inlines_the_outcome_of_its_status():
    result = {"content": [{"type": "text", "text": "ok"}],
              "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t1"}, "keep": 1}}
    done = ext.detailed_task(VIEW, result=result)
    # The inlined result is this era's CallToolResult: resultType "complete" (the official client
    # library, @modelcontextprotocol/ext-tasks, refuses it without), the v1 related-task key gone.
    assert done["resultType"] == "complete"
    assert done["result"] == {"resultType": "complete", "content": result["content"], "_meta": {"keep": 1}}
    failed = ext.detailed_task({**VIEW, "status": "failed"}, result=result, error={"code": -32603, "message": "x"})
    assert failed["error"] == {"code": -32603, "message": "x"} and "result" not in failed
    asking = ext.detailed_task({**VIEW, "status": "input_required"}, input_requests={"k": {"method": "roots/list"}})
    assert asking["inputRequests"] == {"k": {"method": "roots/list"}} and "result" not in asking
    assert "requestState" not in done and "requestState" not in asking


def test_acks_are_empty_complete_results():
    assert ext.ack() == {"resultType": "complete"}
