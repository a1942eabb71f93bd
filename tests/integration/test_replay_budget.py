"""Issue 20, class 9: replays are bounded in bytes per caller over time (REPLAY_BYTES_PER_CALLER
per REPLAY_WINDOW_SECONDS), on Streamable HTTP and HTTP+SSE: a 200-byte resume could replay a
1 MB result again and again (about 1 GB in 15 s from six threads)."""
import json
import secrets

import pytest

from mcp_transport.testing import HttpClient
from tests.integration.test_http_sse import INITIALIZE, INITIALIZED, SseConnection, post
from tests.integration.waiting import eventually

TEXT_BYTES = 100_000  # echo returns it twice (text and structuredContent): a result of ~200 KB
RESULT_BYTES = 2 * TEXT_BYTES
BUDGET = 500_000  # two replays of the result fit, the third does not
GET = {"Accept": "text/event-stream"}
WINDOW = 5


@pytest.fixture
def budget_server(start_server):
    # A key prefix of its own, per test: every test client is 127.0.0.1, one caller, and other
    # servers' (and tests') replays must not spend this budget.
    return start_server(MCP_KEY_PREFIX=f"mcpbudget{secrets.token_hex(3)}",
                        MCP_TRANSPORT_JSON=json.dumps({"REPLAY_BYTES_PER_CALLER": BUDGET,
                                                       "REPLAY_WINDOW_SECONDS": WINDOW}))


def _big_echo(client):
    return client.message("tools/call", {"name": "echo", "arguments": {"text": "x" * TEXT_BYTES}})


def _resume(client, last_event_id):
    return client.request("GET", headers={**GET, "Last-Event-ID": last_event_id})


def test_streamable_http_replays_stop_at_the_budget_with_429_until_the_window_ends(budget_server):
    client = HttpClient(budget_server.url)
    client.initialize()
    stream = client.stream("POST", _big_echo(client), headers={"Accept": "text/event-stream"})
    events = stream.events()
    assert len(events[-1].data) > RESULT_BYTES
    for _ in range(2):
        replayed = _resume(client, events[0].id)
        assert replayed.status == 200 and len(replayed.body) > RESULT_BYTES
    refused = _resume(client, events[0].id)
    assert refused.status == 429, refused.body
    assert 1 <= int(refused.headers["retry-after"]) <= WINDOW
    assert refused.json["error"]["code"] == -32600 and "resume later" in refused.json["error"]["message"]
    # Work goes on meanwhile, and once the window is over an honest resume is whole again.
    assert client.call("ping")["result"] == {}

    def resumed_again():
        again = _resume(client, events[0].id)
        assert again.status == 200, again.status
        return again
    assert json.loads(eventually(resumed_again).body.split(b"data: ")[-1]) == json.loads(events[-1].data)


def test_a_resume_that_replays_nothing_costs_nothing(budget_server):
    client = HttpClient(budget_server.url)
    client.initialize()
    stream = client.stream("GET", headers=GET)
    priming = stream.next_event()
    stream.close()
    for _ in range(20):  # an empty replay is never refused, however many
        resumed = client.stream("GET", headers={**GET, "Last-Event-ID": priming.id})
        assert resumed.status == 200
        resumed.close()


def test_http_sse_replays_stop_at_the_budget(budget_server):
    stream = SseConnection(budget_server)
    endpoint = stream.next()
    assert post(budget_server, endpoint.data, INITIALIZE)[0] == 202
    stream.message()
    assert post(budget_server, endpoint.data, INITIALIZED)[0] == 202
    call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "y" * TEXT_BYTES}}}
    assert post(budget_server, endpoint.data, call)[0] == 202
    reply, _ = stream.message()
    assert reply["id"] == 5
    stream.close()

    def resume():
        again = SseConnection(budget_server, headers={"Last-Event-ID": endpoint.id})
        status = again.response.status
        body = again.response.read() if status != 200 else None
        if status == 200:
            again.next()  # the endpoint event
            replayed = [again.message()[0] for _ in range(2)]  # initialize's result, then the call's
            again.close()
            if replayed[-1] != reply:
                raise RuntimeError(f"not replayed whole: {replayed}")  # never retried by eventually()
        else:
            again.connection.close()
        return status, body
    assert resume()[0] == 200 and resume()[0] == 200
    status, body = resume()
    assert status == 429 and json.loads(body)["error"]["code"] == -32600
