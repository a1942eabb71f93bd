"""``manage.py mcp_stdio`` driven by the official Python SDK's stdio client (mcp 2.3.0): the
same registry, progress, logs, and background tools run by a real Celery worker."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

pytestmark = pytest.mark.filterwarnings("ignore:The logging capability is deprecated")

ROOT = Path(__file__).resolve().parents[2]


def client_env(server_env):
    """The SDK passes only HOME, PATH and a few more on: everything else comes from ``env``
    (tests/settings.py put the secret key in this process's environment)."""
    return {**server_env, "DJANGO_SECRET_KEY": os.environ["DJANGO_SECRET_KEY"]}


def stdio_server(server_env, *args):
    return StdioServerParameters(command=sys.executable, args=["manage.py", "mcp_stdio", *args],
                                 env=client_env(server_env), cwd=str(ROOT))


@pytest.mark.asyncio
async def test_lists_and_calls_tools_with_progress_and_logs(server_env):
    progress, logs = [], []

    async def on_progress(value, total, message):
        progress.append((value, total, message))

    async def on_log(params):
        logs.append(params.data)

    # "auto" probes server/discover first; the error it gets must make it fall back to initialize.
    async with Client(stdio_client(stdio_server(server_env)), mode="auto", logging_callback=on_log) as client:
        assert client.protocol_version == "2025-11-25"
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"echo", "slow_progress", "slow_job"} <= names
        echoed = await client.call_tool("echo", {"text": "Hello, 世界"})
        result = await client.call_tool("slow_progress", {"steps": 4, "interval_ms": 10}, progress_callback=on_progress)
        await client.set_logging_level("debug")
        await client.call_tool("test_tool_with_logging", {})
        text = await client.read_resource("test://static-text")
        prompt = await client.get_prompt("test_prompt_with_arguments", {"arg1": "one", "arg2": "two"})
    assert echoed.structured_content == {"result": "Hello, 世界"}
    assert result.content[0].text == "done 4"
    assert progress == [(1, 4, "step 1"), (2, 4, "step 2"), (3, 4, "step 3"), (4, 4, "step 4")]
    assert len(logs) == 3
    assert text.contents[0].text and "one" in str(prompt.messages)


@pytest.mark.asyncio
async def test_background_tool_runs_in_the_worker_and_its_progress_reaches_stdout(server_env, celery_worker):
    progress = []

    async def on_progress(value, total, message):
        progress.append(value)

    async with Client(stdio_client(stdio_server(server_env)), mode="legacy") as client:
        result = await client.call_tool("slow_job", {"steps": 5, "interval_ms": 20}, progress_callback=on_progress)
    assert result.is_error is not True, result
    assert result.content[0].text == "done 5"
    assert progress == [1, 2, 3, 4, 5]
    assert "mcp_transport.run_job" in celery_worker.log()  # the worker ran it, not the stdio process


def test_stdout_carries_only_messages_and_answers_bad_lines(server_env):
    """A parse error and an overlong line get errors; closing stdin ends the process after the
    answers of what was asked. Whatever else is printed goes to stderr."""
    lines = [b"not json", b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05",'
             b'"capabilities":{},"clientInfo":{"name":"t","version":"0"}}}',
             b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"server_log","arguments":{"text":"x"}}}',
             b'{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"cursor":"' + b"a" * 300 + b'"}}']
    env = {"MCP_TRANSPORT_JSON": json.dumps({"MAX_REQUEST_BYTES": 200})}
    done = subprocess.run([sys.executable, "manage.py", "mcp_stdio"], input=b"\n".join(lines) + b"\n", cwd=ROOT,
                          capture_output=True, timeout=60, env={**os.environ, **server_env, **env})
    assert done.returncode == 0, done.stderr.decode()
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    errors = [reply["error"]["code"] for reply in replies if "error" in reply]
    assert sorted(errors) == [-32700, -32600]
    by_id = {reply.get("id"): reply for reply in replies}
    assert by_id[1]["result"]["protocolVersion"] == "2024-11-05"
    assert by_id[2]["result"]["content"][0]["text"] == "logged"
    assert b"x" in done.stderr  # the tool's log line


def config_blocks():
    """The JSON configuration blocks of docs/stdio.md, as parsed objects."""
    text = (ROOT / "docs" / "stdio.md").read_text()
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", text, re.S)]


@pytest.mark.asyncio
@pytest.mark.parametrize("index", range(2))
async def test_the_documented_client_configurations_start_a_working_server(server_env, index):
    blocks = config_blocks()
    assert len(blocks) == 2
    servers = blocks[index].get("mcpServers") or blocks[index]["servers"]
    entry = json.loads(json.dumps(servers["myproject"]).replace("/path/to/myproject", str(ROOT))
                       .replace("myproject.settings", "mcpserver.settings"))
    assert entry.get("type", "stdio") == "stdio"
    assert Path(entry["command"]).exists(), entry["command"]
    parameters = StdioServerParameters(command=entry["command"], args=entry["args"],
                                       env={**client_env(server_env), **entry["env"]}, cwd="/")
    async with Client(stdio_client(parameters), mode="legacy") as client:
        result = await client.call_tool("echo", {"text": "configured"})
    assert result.structured_content == {"result": "configured"}


def test_terminating_the_session_ends_the_process(server_env):
    """docs/stdio.md: terminating the session (admin, mcp_sessions terminate) ends the process."""
    env = {**os.environ, **server_env, "MCP_TRANSPORT_JSON": json.dumps({"HEARTBEAT_SECONDS": 0.5})}
    process = subprocess.Popen([sys.executable, "manage.py", "mcp_stdio"], cwd=ROOT, env=env, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        started = next(line for line in process.stderr if "stdio session" in line and "started" in line)
        session_id = started.split("stdio session ")[1].split()[0]
        subprocess.run([sys.executable, "manage.py", "mcp_sessions", "terminate", session_id], cwd=ROOT, env=env,
                       check=True, capture_output=True, timeout=120)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()


@pytest.mark.asyncio
async def test_a_tools_request_to_the_client_gets_its_answer(server_env):
    """Sampling: a server-to-client request goes out on stdout, its answer comes back on stdin."""
    from mcp import types

    async def sample(context, params):
        return types.CreateMessageResult(role="assistant", model="test-model",
                                         content=types.TextContent(type="text", text="sampled over stdio"))

    async with Client(stdio_client(stdio_server(server_env)), mode="legacy", sampling_callback=sample) as client:
        result = await client.call_tool("test_sampling", {"prompt": "Say something"})
    assert result.is_error is not True and "sampled over stdio" in result.content[0].text
