"""/metrics' histograms of the OpenTelemetry semantic conventions for MCP, after a known mix of
requests of both eras served by two live daphne processes on one Redis: each process reports the
requests and sessions of both, counted exactly once each, with the conventions' labels and
buckets (docs/operations.md, "Metrics")."""
import http.client
import json
import secrets
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mcp_transport.state.histograms import BOUNDS
from mcp_transport.testing import HttpClient, ModernClient

TOKEN = secrets.token_urlsafe(16)
OPERATION, SESSION = "mcp_server_operation_duration_seconds", "mcp_server_session_duration_seconds"
LE = [str(float(bound)) for bound in BOUNDS] + ["+Inf"]


@pytest.fixture(scope="module")
def pair(start_server):
    """Two servers with a key prefix of their own (exact counts) and fast heartbeats."""
    env = {"MCP_KEY_PREFIX": f"mcpops{secrets.token_hex(3)}", "MCP_METRICS_TOKEN": TOKEN,
           "MCP_TRANSPORT_JSON": json.dumps({"HEARTBEAT_SECONDS": 0.5})}
    return start_server(**env), start_server(**env)


def samples(server) -> dict:
    """{sample name and its labels "name|k=v|k=v" (sorted): value} of one scrape of /metrics."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request("GET", "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    response = connection.getresponse()
    body = response.read().decode()
    connection.close()
    assert response.status == 200, body
    return {sample.name + "".join(f"|{k}={v}" for k, v in sorted(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(body) for sample in family.samples}


def series(found: dict, name: str) -> dict:
    """{labels "k=v|k=v" (sorted, ``le`` left out): {sample suffix or le: value}} of a histogram."""
    out = {}
    for key, value in found.items():
        sample, *labels = key.split("|")
        if not sample.startswith(name):
            continue
        le = [label[3:] for label in labels if label.startswith("le=")]
        rest = "|".join(label for label in labels if not label.startswith("le="))
        out.setdefault(rest, {})[le[0] if le else sample[len(name) + 1:]] = value
    return out


def counts(found: dict, name: str) -> dict:
    return {labels: values["count"] for labels, values in series(found, name).items()}


def settled(server, name, expected, timeout=60):
    """The counts once they are the expected ones (each process flushes every 0.5 s here)."""
    deadline = time.monotonic() + timeout
    while True:
        found = samples(server)
        if counts(found, name) == expected or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_every_request_and_session_of_both_processes_is_counted_once_with_the_conventions_labels(pair):
    first, second = pair
    legacy = HttpClient(first.url)
    legacy.initialize()  # initialize (notifications/initialized is a notification: no operation)
    for text in ("a", "b", "c"):
        assert legacy.call("tools/call", {"name": "echo", "arguments": {"text": text}})["result"]
    assert legacy.call("tools/call", {"name": "test_error_handling", "arguments": {}})["result"]["isError"] is True
    for name in ("no_such_tool", f"made-up-{secrets.token_hex(4)}"):  # a client's names make no label
        assert legacy.call("tools/call", {"name": name, "arguments": {}})["error"]["code"] == -32602
    assert legacy.on(second.url).call(f"made/up-{secrets.token_hex(4)}")["error"]["code"] == -32601
    assert legacy.on(second.url).call("tools/list")["result"]["tools"]

    modern = ModernClient(second.url)
    for text in ("d", "e"):
        reply = modern.post("tools/call", {"name": "echo", "arguments": {"text": text}})
        assert reply.status == 200 and reply.json["result"]["content"][0]["text"] == text
    missing = modern.post("tools/call", {"name": "test_missing_capability", "arguments": {}})
    assert missing.status == 400 and missing.json["error"]["code"] == -32021  # an error of the server's
    assert ModernClient(first.url).post("no/such-method").json["error"]["code"] == -32601

    others = [HttpClient(server.url) for server in (second, first)]
    for client in others:
        client.initialize()
    # A session is counted when it closes if it did something: the one that only initialized
    # keeps no row (churn leaves nothing behind), so its duration is not observed either.
    assert "result" in others[0].call("ping")
    assert legacy.on(second.url).delete().status == 200  # closed by the other process
    assert others[0].delete().status == 200 and others[1].delete().status == 200
    assert others[1].delete().status == 404  # closed already: nothing more to count

    expected = {
        "mcp_method_name=initialize": 3,
        "gen_ai_tool_name=echo|mcp_method_name=tools/call": 5,
        "error_type=tool_error|gen_ai_tool_name=test_error_handling|mcp_method_name=tools/call": 1,
        "mcp_method_name=tools/call": 2,  # unknown tools: -32602 is the caller's, not an error
        "mcp_method_name=_OTHER": 2,  # unknown methods, one per era: -32601 likewise
        "mcp_method_name=tools/list": 1,
        "mcp_method_name=ping": 1,
        "error_type=-32021|gen_ai_tool_name=test_missing_capability|mcp_method_name=tools/call": 1,
    }
    for server in (first, second):  # every process reports the requests and sessions of both
        found = settled(server, OPERATION, expected)
        assert counts(found, OPERATION) == expected
        found = settled(server, SESSION, {"": 2})
        assert counts(found, SESSION) == {"": 2}
        for name in (OPERATION, SESSION):
            for labels, values in series(found, name).items():
                buckets = [values[le] for le in LE]  # the conventions' bounds, each one there, cumulative
                assert buckets == sorted(buckets) and buckets[-1] == values["count"], (labels, values)
                assert values["300.0"] == values["count"] and 0 < values["sum"] < 300 * values["count"]
