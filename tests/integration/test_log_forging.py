"""Issue 20, class 10: CR, LF and other control characters a client sends never start a line of
the server's plain-format log (clientInfo, request ids, what a tool logs, both eras)."""
import pytest

from mcp_transport.testing import HttpClient, ModernClient
from tests.integration.waiting import eventually

FORGED_START = "2026-12-01 00:00:00,000 ERROR forged"
FORGED = f"a\r\n{FORGED_START} [x y] by a client\u2028{FORGED_START}\x85{FORGED_START}\x1b[2J"


@pytest.fixture(scope="module")
def plain_server(start_server):
    return start_server(MCP_LOG_LEVEL="INFO", LOG_LEVEL="WARNING")


def _forged_lines(server):
    return [line for line in server.log().splitlines() if line.startswith(FORGED_START)]


def _logged(server, text):
    assert text in server.log(), server.log()[-2000:]
    return True


def test_client_info_request_ids_and_tool_text_stay_on_their_line(plain_server):
    client = HttpClient(plain_server.url)
    params = {"protocolVersion": "2025-11-25", "capabilities": {},
              "clientInfo": {"name": FORGED, "version": FORGED}}
    reply = client.request("POST", client.message("initialize", params, request_id=f"init{FORGED}"), session=False)
    assert reply.status == 200, reply.body
    client.session_id = reply.headers["mcp-session-id"]
    call = client.message("tools/call", {"name": "server_log", "arguments": {"text": f"tool{FORGED}"}},
                          request_id=f"call{FORGED}")
    assert client.request("POST", call).status == 200
    eventually(lambda: _logged(plain_server, "] tool" + "a\\r\\n"))
    assert _logged(plain_server, " call" + "a\\r\\n")
    assert _logged(plain_server, "session opened by a\\r\\n" + FORGED_START)
    assert _forged_lines(plain_server) == []


def test_a_2026_request_id_and_tool_text_stay_on_their_line(plain_server):
    client = ModernClient(plain_server.url)
    reply = client.post("tools/call", {"name": "server_log", "arguments": {"text": f"modern{FORGED}"}},
                        request_id=f"modern-id{FORGED}")
    assert reply.status == 200, reply.body
    eventually(lambda: _logged(plain_server, "] modern" + "a\\r\\n"))
    assert _logged(plain_server, "modern-id" + "a\\r\\n")
    assert _forged_lines(plain_server) == []
