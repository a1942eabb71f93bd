"""Structured logs of a live server: every record of a request carries its session and request ids."""
import json
import time

import pytest

from mcp_transport.testing import HttpClient


@pytest.fixture(scope="module")
def json_logging_server(start_server):
    return start_server(LOG_FORMAT="json", MCP_LOG_LEVEL="INFO", LOG_LEVEL="WARNING")


def json_records(server):
    records = []
    for line in server.log().splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue  # daphne's own access lines
    return records


def wait_for(server, predicate, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [entry for entry in json_records(server) if predicate(entry)]
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"no such log record in:\n{server.log()[-3000:]}")


def test_a_sync_tool_logs_with_the_session_and_request_ids(json_logging_server):
    client = HttpClient(json_logging_server.url)
    initialize = client.initialize()
    (opened,) = wait_for(json_logging_server, lambda entry: entry.get("mcp_session_id") == client.session_id[:8]
                         and entry["message"].startswith("session opened"))
    assert opened["logger"] == "mcp_transport.state.sessions" and opened["level"] == "INFO"
    assert "mcp-transport-tests" in opened["message"]
    assert initialize.json["id"] == 1 and opened["mcp_request_id"] == 1

    message = client.message("tools/call", {"name": "server_log", "arguments": {"text": "marker-7f3a"}})
    response = _call(client, message)
    assert response["result"]["structuredContent"] == {"result": "logged"}
    (logged,) = wait_for(json_logging_server, lambda entry: entry["message"] == "marker-7f3a")
    assert (logged["logger"], logged["level"]) == ("tools", "WARNING")
    assert (logged["mcp_session_id"], logged["mcp_request_id"]) == (client.session_id[:8], message["id"])


def test_session_end_is_logged_with_its_reason(json_logging_server):
    client = HttpClient(json_logging_server.url)
    client.initialize()
    assert client.delete().status == 200
    (closed,) = wait_for(json_logging_server, lambda entry: entry.get("mcp_session_id") == client.session_id[:8]
                         and entry["message"].startswith("session closed"))
    assert closed["message"] == "session closed: deleted"


def test_no_log_line_carries_a_full_session_id(json_logging_server):
    """The session id is the session's credential: logs show its first 8 characters only."""
    client = HttpClient(json_logging_server.url)
    client.initialize()
    _call(client, client.message("tools/call", {"name": "server_log", "arguments": {"text": "marker-c41d"}}))
    assert client.delete().status == 200
    wait_for(json_logging_server, lambda entry: entry.get("mcp_session_id") == client.session_id[:8]
             and entry["message"].startswith("session closed"))
    assert client.session_id[:8] in json_logging_server.log()
    assert client.session_id not in json_logging_server.log()


def _call(client, message):
    stream = client.stream("POST", message)
    body = stream.response.read()
    stream.connection.close()
    return json.loads(body)
