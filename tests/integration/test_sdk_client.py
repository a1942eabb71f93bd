"""The official MCP Python SDK client (`mcp` 2.3.0) against a real daphne process."""
import pytest
from mcp import Client, types

pytestmark = [pytest.mark.asyncio,
              # Logging is deprecated in 2026-07-28 only; these sessions are 2025-11-25.
              pytest.mark.filterwarnings("ignore:The logging capability is deprecated")]


@pytest.mark.parametrize("mode, version", [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
async def test_sdk_client_connects_and_calls_echo(mcp_server, mode, version):
    # "auto" (the default) probes server/discover at 2026-07-28 and stays modern with us; "legacy"
    # sends initialize and gets a 2025-11-25 session on the same endpoint.
    async with Client(mcp_server.url, mode=mode) as client:
        assert client.protocol_version == version
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"echo", "slow_progress", "test_sampling"} <= names
        result = await client.call_tool("echo", {"text": "Hello, 世界"})
    assert result.is_error is not True
    assert result.structured_content == {"result": "Hello, 世界"}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_progress_arrives_before_the_result_and_increases(mcp_server, mode):
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, total, message))

    async with Client(mcp_server.url, mode=mode) as client:
        result = await client.call_tool("slow_progress", {"steps": 5, "interval_ms": 10},
                                         progress_callback=on_progress)
    assert result.content[0].text == "done 5"
    assert [p for p, _, _ in seen] == [1, 2, 3, 4, 5]
    assert seen[-1] == (5, 5, "step 5")


async def test_sampling_request_reaches_the_client_and_its_answer_the_tool(mcp_server):
    async def sample(context, params: types.CreateMessageRequestParams):
        assert params.messages[0].content.text == "Test prompt for sampling"
        return types.CreateMessageResult(role="assistant", model="test-model",
                                         content=types.TextContent(type="text", text="sampled text"))

    async with Client(mcp_server.url, mode="legacy", sampling_callback=sample) as client:
        result = await client.call_tool("test_sampling", {"prompt": "Test prompt for sampling"})
    assert result.is_error is not True
    assert "sampled text" in result.content[0].text


async def test_elicitation_answer_reaches_the_tool(mcp_server):
    async def elicit(context, params):
        return types.ElicitResult(action="accept", content={"username": "ada", "email": "ada@example.com"})

    async with Client(mcp_server.url, mode="legacy", elicitation_callback=elicit) as client:
        result = await client.call_tool("test_elicitation", {"message": "Who are you?"})
    assert result.is_error is not True
    assert "ada@example.com" in result.content[0].text


async def test_log_messages_respect_the_session_level(mcp_server):
    received = []

    async def on_log(params):
        received.append(params.level)

    async with Client(mcp_server.url, mode="legacy", logging_callback=on_log) as client:
        await client.set_logging_level("error")
        await client.call_tool("test_tool_with_logging", {})
        assert received == []  # the tool logs at info: below "error", so nothing is sent
        await client.set_logging_level("debug")
        await client.call_tool("test_tool_with_logging", {})
    assert len(received) >= 3


async def test_resources_prompts_and_completion(mcp_server):
    async with Client(mcp_server.url, mode="legacy") as client:
        text = await client.read_resource("test://static-text")
        assert text.contents[0].text
        templated = await client.read_resource("test://template/123/data")
        assert "123" in templated.contents[0].text
        prompt = await client.get_prompt("test_prompt_with_arguments", {"arg1": "one", "arg2": "two"})
        assert "one" in str(prompt.messages) and "two" in str(prompt.messages)
        completion = await client.complete(types.PromptReference(type="ref/prompt", name="test_prompt_with_arguments"),
                                           {"name": "arg1", "value": "test"})
        assert completion.completion.values


async def test_tool_errors_are_results_not_protocol_errors(mcp_server):
    async with Client(mcp_server.url, mode="legacy") as client:
        failed = await client.call_tool("test_error_handling", {})
        invalid = await client.call_tool("echo", {"text": 42})
    assert failed.is_error is True and failed.content[0].text
    assert invalid.is_error is True and "text" in invalid.content[0].text


async def test_roots_request_from_a_sync_tool_reaches_the_client(mcp_server):
    async def roots(context):
        return types.ListRootsResult(roots=[types.Root(uri="file:///work/project", name="project")])

    async with Client(mcp_server.url, mode="legacy", list_roots_callback=roots) as client:
        result = await client.call_tool("client_roots", {})
    assert result.structured_content == {"result": ["file:///work/project"]}


async def test_default_client_is_modern_and_runs_a_background_tool(mcp_server, celery_worker):
    seen = []

    async def on_progress(progress, total, message):
        seen.append(progress)

    async with Client(mcp_server.url) as client:
        assert client.protocol_version == "2026-07-28"
        result = await client.call_tool("slow_job", {"steps": 3, "interval_ms": 10}, progress_callback=on_progress)
        resource = await client.read_resource("test://static-text")
    assert result.content[0].text == "done 3"
    assert seen[:3] == [1, 2, 3]
    assert resource.contents[0].text
