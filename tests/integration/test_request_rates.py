"""Issue 38: a caller's requests of every method, not only tools/call, are rate limited
(REQUEST_RATE_LIMIT), and an address's new sessions (SESSION_OPEN_RATE), one budget shared by two
real daphne processes, in both eras and over HTTP+SSE.

Each test is a caller of its own: the servers trust 127.0.0.1 as a proxy, and every request of a
test carries its own X-Forwarded-For address. The periods are an hour (``6/h``: a token every
10 minutes), so nothing refills while a test runs: what passes depends on the count alone.
"""
import http.client
import itertools
import json
import re
import secrets
from concurrent.futures import ThreadPoolExecutor

import pytest
from mcp import Client
from mcp.client.sse import sse_client
from mcp.shared.exceptions import MCPError
from prometheus_client.parser import text_string_to_metric_families

from mcp_transport.testing import HttpClient, ModernClient

from .waiting import eventually

RATE, OPENS = 6, 3
REQUEST_REFUSAL = re.compile(r"This client has made its 6 requests per hour \(REQUEST_RATE_LIMIT 6/h\): "
                             r"retry in (\d+) s\.")
OPEN_REFUSAL = re.compile(r"This address has opened its 3 sessions per hour \(SESSION_OPEN_RATE 3/h\): "
                          r"retry in (\d+) s\.")
METRICS_TOKEN = secrets.token_urlsafe(16)
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
_addresses = (f"198.51.100.{n}" for n in itertools.count(1))


@pytest.fixture(scope="module")
def pair(start_server):
    name = f"mcpreqrate{secrets.token_hex(3)}"
    env = {"MCP_KEY_PREFIX": name, "CELERY_QUEUE": name, "MCP_REQUEST_RATE_LIMIT": f"{RATE}/h",
           "MCP_SESSION_OPEN_RATE": f"{OPENS}/h", "MCP_MAX_SESSIONS_PER_ADDRESS": "1000",
           "MCP_METRICS_TOKEN": METRICS_TOKEN,
           "MCP_TRANSPORT_JSON": json.dumps({"TRUSTED_PROXIES": ["127.0.0.1"], "HEARTBEAT_SECONDS": 0.3})}
    return start_server(**env), start_server(**env)


class Forwarded:
    """A test client whose every request comes, as the trusted proxy says, from ``address``."""

    def headers(self, extra=None, session=True):
        return {**super().headers(extra, session), "X-Forwarded-For": self.address}


class Legacy(Forwarded, HttpClient):
    def __init__(self, server, address):
        super().__init__(server.url)
        self.address = address


class Modern(Forwarded, ModernClient):
    def __init__(self, server, address, capabilities=None):
        super().__init__(server.url, capabilities)
        self.address = address


def legacy_post(client, method, params=None):
    return client.request("POST", client.message(method, params or {}))


def assert_answered(reply):
    assert reply.status == 200, (reply.status, reply.body)
    assert "result" in reply.json or reply.json["error"]["code"] == -32602, reply.json  # (tasks/get: not found)


def assert_refused(reply, pattern=REQUEST_REFUSAL, period=600):
    """429, Retry-After within the time a token takes to come back, a -32600 error naming the limit."""
    assert reply.status == 429, (reply.status, reply.body)
    retry_after = int(reply.headers["retry-after"])
    assert period - 60 <= retry_after <= period, retry_after
    error = reply.json["error"]
    assert error["code"] == -32600 and int(pattern.fullmatch(error["message"])[1]) == retry_after, error


def at_once(sends) -> list:
    with ThreadPoolExecutor(len(sends)) as pool:
        return list(pool.map(lambda send: send(), sends))


def test_every_method_of_both_eras_takes_a_token_of_one_budget_on_both_processes(pair):
    first, second = pair
    address = next(_addresses)
    legacy = [Legacy(server, address) for server in pair]
    for client in legacy:
        client.initialize()  # initialize is not a request of the budget: SESSION_OPEN_RATE's
    modern = [Modern(server, address, TASKS) for server in pair]
    task = {"taskId": "A" * 32}
    sent = [lambda: modern[0].post("resources/list"),
            lambda: legacy_post(legacy[1], "prompts/get", {"name": "test_simple_prompt"}),
            lambda: modern[1].post("skills/list"),
            lambda: modern[0].post("resources/read", {"uri": "test://static-text"}),
            lambda: legacy_post(legacy[0], "ping"),
            lambda: modern[1].post("tasks/get", task)]
    for send in sent:
        assert_answered(send())
    refused = [modern[0].post("tasks/get", task), legacy_post(legacy[1], "resources/list"),
               modern[1].post("tools/call", {"name": "echo", "arguments": {"text": "x"}}),
               legacy_post(legacy[0], "tools/call", {"name": "echo", "arguments": {"text": "x"}})]
    for reply in refused:
        assert_refused(reply)
    other = next(_addresses)  # another caller is not touched, on either process
    assert_answered(Modern(first, other).post("resources/list"))
    assert_answered(Modern(second, other).post("resources/list"))


def test_exactly_n_of_many_requests_sent_at_once_to_both_processes_pass(pair):
    address = next(_addresses)
    clients = [Modern(server, address) for server in pair]
    replies = at_once([lambda n=n: clients[n % 2].post("resources/list") for n in range(14)])
    assert sorted(reply.status for reply in replies) == [200] * RATE + [429] * (14 - RATE)
    for reply in replies:
        assert_answered(reply) if reply.status == 200 else assert_refused(reply)


@pytest.mark.asyncio
async def test_http_sse_requests_take_tokens_of_the_same_budget(pair):
    """The 2024-11-05 transport goes through the same pipeline: the official SDK's SSE client gets
    six tools/list answered, then a -32600 error naming the limit; the caller's next request on
    the other process, in another era, is refused too."""
    first, second = pair
    address = next(_addresses)
    headers = {"X-Forwarded-For": address}
    async with Client(sse_client(f"http://127.0.0.1:{first.port}/sse", headers=headers), mode="legacy") as client:
        for _ in range(RATE):
            assert "echo" in {tool.name for tool in (await client.list_tools()).tools}
        with pytest.raises(MCPError) as refused:
            await client.list_tools()
    assert refused.value.error.code == -32600 and REQUEST_REFUSAL.fullmatch(refused.value.error.message)
    assert_refused(Modern(second, address).post("tools/list"))


def test_an_address_opens_n_sessions_per_period_on_both_processes_whatever_it_deletes(pair):
    first, second = pair
    address = next(_addresses)
    for server in (first, second, first):
        client = Legacy(server, address)
        client.initialize()
        assert client.delete().status == 200
    for server in pair:
        client = Legacy(server, address)
        assert_refused(client.request("POST", client.message("initialize", {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "churn", "version": "0"}}),
            session=False), OPEN_REFUSAL, period=1200)
    # The 2024-11-05 transport opens its session with GET /sse: refused the same way.
    connection = http.client.HTTPConnection("127.0.0.1", second.port, timeout=30)
    connection.request("GET", "/sse", headers={"Accept": "text/event-stream", "X-Forwarded-For": address})
    response = connection.getresponse()
    body = response.read()
    connection.close()
    assert response.status == 429 and OPEN_REFUSAL.fullmatch(json.loads(body)["error"]["message"]), body
    Legacy(second, next(_addresses)).initialize()  # another address opens its own


def test_the_refusals_are_counted_by_limit(pair):
    address = next(_addresses)
    client = Modern(pair[0], address)
    for _ in range(RATE):
        assert_answered(client.post("tools/list"))
    assert_refused(client.post("tools/list"))

    def counted():
        connection = http.client.HTTPConnection("127.0.0.1", pair[1].port, timeout=30)
        connection.request("GET", "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
        text = connection.getresponse().read().decode()
        connection.close()
        found = {sample.labels["limit"]: sample.value for family in text_string_to_metric_families(text)
                 for sample in family.samples if sample.name == "mcp_limit_refusals_total"}
        assert found["request_rate"] >= 1 and "session_open_rate" in found, found
    eventually(counted)
