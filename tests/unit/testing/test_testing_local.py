"""LocalClient (mcp_transport.testing.local): the example project's tools, in this process."""
import pytest

from mcp_transport.protocol.errors import ProtocolError
from mcp_transport.testing.local import LocalClient


async def test_a_tool_result_and_what_it_sent_on_the_way():
    call = await LocalClient().call_tool("slow_progress", {"steps": 3, "interval_ms": 0})
    assert call.text == "done 3" and call.structured == {"result": "done 3"} and not call.is_error
    assert [(p["progress"], p["message"]) for p in call.progress] == [(1, "step 1"), (2, "step 2"), (3, "step 3")]


async def test_logs_follow_the_clients_level():
    assert len((await LocalClient(log_level="debug").call_tool("test_tool_with_logging")).logs) == 3
    assert (await LocalClient(log_level="error").call_tool("test_tool_with_logging")).logs == []


async def test_a_background_tool_runs_inline_with_progress():
    call = await LocalClient().call_tool("export_report", {"rows": 2, "delay": 0})
    assert call.text == "exported 2 rows" and [p["progress"] for p in call.progress] == [1, 2]


async def test_requests_to_the_client_get_the_given_answer():
    def answer(method, params):
        assert method == "elicitation/create"
        return {"action": "accept", "content": {"username": "ada", "email": "ada@example.com"}}

    client = LocalClient(client_capabilities={"elicitation": {}}, answer=answer)
    call = await client.call_tool("test_elicitation", {"message": "Who are you?"})
    assert "ada@example.com" in call.text and call.requests[0]["method"] == "elicitation/create"


async def test_errors_are_results_or_protocol_errors_as_over_the_network():
    assert (await LocalClient().call_tool("test_error_handling")).is_error
    assert (await LocalClient().call_tool("echo", {"text": 5})).is_error  # invalid arguments
    with pytest.raises(ProtocolError) as raised:
        await LocalClient().call_tool("no_such_tool")
    assert raised.value.code == -32602


def test_sync_tests_call_it_too():
    assert LocalClient().call_tool_sync("echo", {"text": "hi"}).text == "hi"
