"""Issue 30, class 8: a value a client sends is never copied whole into the server's log: a
malformed ``tracestate`` (HTTP header or ``params._meta``, both eras) that OpenTelemetry's
propagator warns about, and a session's ``clientInfo``, show their first characters, escaped,
and their length (logs.client_value) -- on a real daphne recording spans."""
import pytest

from mcp_transport.testing import HttpClient, ModernClient

from .waiting import eventually

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
LONG = 7000


@pytest.fixture(scope="module")
def traced_server(start_server, tmp_path_factory):
    spans = tmp_path_factory.mktemp("client-values") / "spans.jsonl"
    return start_server(OTEL_SPANS_FILE=str(spans), MCP_LOG_LEVEL="INFO", LOG_LEVEL="WARNING")


def bad_tracestate(marker: str, controls: str = "") -> str:
    """A tracestate whose second member is no W3C member: one long run of ``marker``, under the
    propagator's 8,192-character bound (above it, it warns without quoting)."""
    return f"rojo=00f067aa0ba902b7,{controls}{marker * LONG}"


def quoted(server, marker, length):
    log = server.log()
    assert f"({length} characters)" in log, log[-2000:]
    return log


def assert_quoted_briefly(server, marker, length):
    log = eventually(lambda: quoted(server, marker, length))
    assert marker * 100 not in log, f"{log.count(marker)} characters of the client's value are in the log"
    line = next(line for line in log.splitlines() if f"({length} characters)" in line)
    assert len(line) < 400, line
    return log, line


def test_a_bad_tracestate_header_is_shown_by_its_start_and_length(traced_server):
    client = HttpClient(traced_server.url)
    client.initialize()
    tracestate = bad_tracestate("Q")
    answer = client.call("tools/call", {"name": "echo", "arguments": {"text": "hi"}},
                         headers={"traceparent": TRACEPARENT, "tracestate": tracestate})
    assert answer["result"]["content"][0]["text"] == "hi"
    _, line = assert_quoted_briefly(traced_server, "Q", LONG)
    assert "WARNING" in line and "QQQQ" in line


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
def test_a_bad_tracestate_in_meta_is_shown_escaped(traced_server, era):
    marker = "Z" if era == "2025-11-25" else "W"
    meta = {"traceparent": TRACEPARENT, "tracestate": bad_tracestate(marker, controls="\x1b[2J\r\n")}
    params = {"name": "echo", "arguments": {"text": "hi"}, "_meta": meta}
    if era == "2025-11-25":
        client = HttpClient(traced_server.url)
        client.initialize()
        answer = client.call("tools/call", params)
    else:
        answer = ModernClient(traced_server.url).post("tools/call", params).json
    assert answer["result"]["content"][0]["text"] == "hi", answer
    log, line = assert_quoted_briefly(traced_server, marker, LONG + len("\x1b[2J\r\n"))
    assert "\\x1b[2J\\r\\n" in line and "\x1b" not in log


def test_a_long_client_name_is_shown_by_its_start_and_length(traced_server):
    client = HttpClient(traced_server.url)
    params = {"protocolVersion": "2025-11-25", "capabilities": {},
              "clientInfo": {"name": "client\x1b" + "N" * 5000, "version": "V" * 3000}}
    reply = client.request("POST", client.message("initialize", params), session=False)
    assert reply.status == 200, reply.body
    log, line = assert_quoted_briefly(traced_server, "N", 5007)
    assert line.split("] ", 1)[1].startswith("session opened by client\\x1b") and "(3000 characters)" in line
    assert "V" * 100 not in log
