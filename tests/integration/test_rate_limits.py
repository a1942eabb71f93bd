"""Rate limits shared by every process (issue 33): RATE_LIMIT tools/call requests per caller per
window, counted in one Redis for two real daphne processes, in both eras and over HTTP+SSE.

Authorization is on: a caller is its user, and each user here has tokens of its own (one user's
two tokens share one budget). The window is an hour (``MCP_RATE_LIMIT=4/h``, the example
project's variable; ``rationed_echo`` declares 3/h of its own), so no test can cross it: what
passes and what is refused depends on the count alone, never on the machine's speed. Calls are
sent to both processes at once, so exactly N of M passing means one atomic count between them.
"""
import http.client
import json
import os
import re
import secrets
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.sse import sse_client
from mcp.shared.exceptions import MCPError
from prometheus_client.parser import text_string_to_metric_families

from mcp_transport.testing import HttpClient, ModernClient

from .test_admin import Admin
from .waiting import eventually

ROOT = Path(__file__).resolve().parents[2]
RATE, WINDOW = 4, 3600
ECHO = {"name": "echo", "arguments": {"text": "counted"}}
RATIONED = {"name": "rationed_echo", "arguments": {"text": "counted"}}
REFUSAL = re.compile(r"This client has made its 4 tool calls per hour \(RATE_LIMIT 4/h\): retry in (\d+) s\.")
METRICS_TOKEN = secrets.token_urlsafe(16)
#: The rate refusals this file's tests have seen so far: what the servers' counter must come to.
refused_so_far = [0]


@pytest.fixture(scope="module")
def pair(start_server):
    """Two daphne processes on one Redis (a key prefix of their own: the refusals counted are
    this file's), each caller allowed 4 tools/call an hour."""
    name = f"mcprate{secrets.token_hex(3)}"
    env = {"MCP_KEY_PREFIX": name, "CELERY_QUEUE": name, "MCP_AUTH": "on", "MCP_RATE_LIMIT": f"{RATE}/h",
           "MCP_METRICS_TOKEN": METRICS_TOKEN, "MCP_TRANSPORT_JSON": json.dumps({"HEARTBEAT_SECONDS": 0.3})}
    return start_server(**env), start_server(**env)


@pytest.fixture(scope="module")
def tokens(server_env):
    """``tokens(n)``: n bearer tokens of one new user (one subprocess for them all)."""
    def make(count):
        user = f"rated-{secrets.token_hex(4)}"
        code = ("import json; from mcp_transport.auth import tokens; "
                f"print(json.dumps([tokens.create({user!r}, 'mcp')[1] for _ in range({count})]))")
        done = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT,
                              env={**os.environ, **server_env}, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])
    return make


def at_once(calls) -> list:
    """The replies of ``calls`` (functions), all sent at the same time."""
    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(lambda call: call(), calls))


def session_of(server, token) -> HttpClient:
    client = HttpClient(server.url, token=token)
    client.initialize()
    return client


def modern_of(server, token) -> ModernClient:
    client = ModernClient(server.url)
    client.token = token
    return client


def posted(client: HttpClient, params=ECHO):
    """A 2025-11-25 tools/call as raw HTTP: (message, reply)."""
    message = client.message("tools/call", params)
    return message, client.request("POST", message)


def modern_posted(client: ModernClient, params=ECHO):
    """A 2026-07-28 tools/call as raw HTTP: (message, reply)."""
    message = client.modern_message("tools/call", params)
    return message, client.request("POST", message, client.modern_headers(message), session=False)


def assert_served(sent):
    message, reply = sent
    assert reply.status == 200, (reply.status, reply.body)
    assert reply.json["id"] == message["id"] and reply.json["result"]["structuredContent"] == {"result": "counted"}


def assert_rate_refused(sent, pattern=REFUSAL, window=WINDOW):
    """429, Retry-After in whole seconds within the window, a -32600 error with the request's
    id and one sentence naming the limit: the refusal of every other limit of this server."""
    message, reply = sent
    assert reply.status == 429, (reply.status, reply.body)
    retry_after = int(reply.headers["retry-after"])
    assert 1 <= retry_after <= window
    body = reply.json
    assert body["id"] == message["id"] and body["error"]["code"] == -32600, body
    found = pattern.fullmatch(body["error"]["message"])
    assert found and int(found[1]) == retry_after, body
    refused_so_far[0] += 1


def split(replies) -> tuple:
    served = [sent for sent in replies if sent[1].status == 200]
    return served, [sent for sent in replies if sent[1].status != 200]


def assert_all_refusals_counted(server):
    """``mcp_limit_refusals_total{limit="rate"}``, as the server's /metrics says it once both
    processes flushed their counters, is every refusal this file's tests saw."""
    eventually(lambda: _equal(_refusals_counted(server), refused_so_far[0]))


def _equal(value, expected):
    assert value == expected, (value, expected)


def _refusals_counted(server) -> float:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    connection.request("GET", "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    response = connection.getresponse()
    body = response.read().decode()
    connection.close()
    assert response.status == 200, body
    return next(sample.value for family in text_string_to_metric_families(body) for sample in family.samples
                if sample.name == "mcp_limit_refusals_total" and sample.labels == {"limit": "rate"})


#: How a client of each era connects with a token and sends one tools/call.
ERAS = {"2025-11-25": (session_of, posted), "2026-07-28": (modern_of, modern_posted)}


@pytest.mark.parametrize("era", ERAS)
def test_exactly_n_calls_of_a_users_two_tokens_pass_across_both_processes(pair, tokens, era):
    connect, call = ERAS[era]
    first, second = pair
    one, two = tokens(2)
    clients = [connect(first, one), connect(second, two)]
    served, refused = split(at_once([lambda n=n: call(clients[n % 2]) for n in range(10)]))
    assert len(served) == RATE and len(refused) == 10 - RATE
    for sent in served:
        assert_served(sent)
    for sent in refused:
        assert_rate_refused(sent)
    assert_rate_refused(call(clients[0]))  # the next, on either process
    assert_rate_refused(call(clients[1]))
    other = tokens(1)[0]  # another user is not touched, on either process
    assert_served(call(connect(first, other)))
    assert_served(call(connect(second, other)))
    assert_all_refusals_counted(second)


def test_one_budget_across_eras_and_a_tool_of_its_own_counted_apart(pair, tokens):
    first, second = pair
    one, two = tokens(2)
    legacy, modern = session_of(first, one), modern_of(second, two)
    for sent in (posted(legacy), modern_posted(modern), posted(legacy), modern_posted(modern)):
        assert_served(sent)
    assert_rate_refused(modern_posted(modern_of(first, one)))
    assert_rate_refused(posted(session_of(second, two)))
    # rationed_echo's 3 an hour are its own: the echo budget is spent, its is not.
    rationed = re.compile(r"This client has made its 3 calls of rationed_echo per hour "
                          r"\(the tool's rate_limit 3/h\): retry in (\d+) s\.")
    for sent in (posted(legacy, RATIONED), modern_posted(modern, RATIONED), posted(legacy, RATIONED)):
        assert_served(sent)
    assert_rate_refused(modern_posted(modern, RATIONED), rationed)
    assert_rate_refused(posted(legacy, RATIONED), rationed)


@pytest.mark.asyncio
async def test_http_sse_calls_count_in_the_same_budget(pair, tokens):
    """The 2024-11-05 transport goes through the same pipeline: the official SDK's SSE client
    gets its four calls, then a -32600 error naming the limit; the user's next call on the other
    process, in another era, is refused too."""
    first, second = pair
    token = tokens(1)[0]
    headers = {"Authorization": f"Bearer {token}"}
    async with Client(sse_client(f"http://127.0.0.1:{first.port}/sse", headers=headers), mode="legacy") as client:
        for _ in range(RATE):
            assert (await client.call_tool("echo", {"text": "counted"})).structured_content == {"result": "counted"}
        with pytest.raises(MCPError) as refused:
            await client.call_tool("echo", {"text": "counted"})
    assert refused.value.error.code == -32600 and REFUSAL.fullmatch(refused.value.error.message)
    refused_so_far[0] += 1
    assert_rate_refused(modern_posted(modern_of(second, token)))
    assert_all_refusals_counted(first)


def test_the_admin_dashboard_shows_the_limit(pair, admin_login, tokens):
    first, _ = pair
    token = tokens(1)[0]
    client = session_of(first, token)
    for _ in range(RATE):
        assert_served(posted(client))
    assert_rate_refused(posted(client))
    admin = Admin(first, admin_login)

    def card():
        html = admin.page("/admin/mcp_transport/mcpsession/dashboard/")
        found = re.search(r'<div class="label">Rate limit per caller</div><div class="value">([^<]+)</div>'
                          r'<div class="detail">([^<]+)</div>', html)
        assert found and found[1] == "4/h", html[-3000:]
        refused, own = found[2].split("; ")
        assert refused == f"{refused_so_far[0]:,} calls refused" and own == "own limits: rationed_echo 3/h"
    eventually(card)
