"""Bad bearer tokens cost a bounded number of database lookups (issue 38), on a real daphne with
``MCP_AUTH=on`` whose queries are counted (``mcpserver/db_probe.py``).

Before, every random token cost two lookups (the static tokens' table, then the toolkit's), with
no memory of a refusal and no bound: a flood of them made a user's first call 3.5 -> 94 ms. Now
a refusal is remembered for AUTH_FAILURE_CACHE_SECONDS, and the lookups of one client network are
bounded per window: past it, 429 with Retry-After before any lookup (mcp_transport/auth/failures.py).
The loopback peer is a trusted proxy here, so each test's client sends from an address of its own."""
import itertools
import json
import os
import secrets
import subprocess
import sys

import pytest

from mcp_transport.testing import HttpClient

from .test_auth import ROOT, new_token
from .waiting import eventually

BOUND = 4
#: The tables a token lookup reads.
TOKEN_TABLES = ("mcp_transport_mcptoken", "oauth2_provider_accesstoken")


@pytest.fixture(scope="module")
def probed(start_server, tmp_path_factory):
    """(server, the file its queries are written to)."""
    folder = tmp_path_factory.mktemp("bad-tokens-probe")
    server = start_server(MCP_AUTH="on", MCP_DB_PROBE=str(folder), MCP_TRUSTED_PROXIES="127.0.0.1",
                          MCP_TRANSPORT_JSON=json.dumps({"AUTH_FAILURES_PER_ADDRESS": BOUND, "AUTH_FAILURE_WINDOW": 600,
                                                         "AUTH_FAILURE_CACHE_SECONDS": 600}))
    return server, folder / "queries.log"


def token_lookups(log) -> int:
    if not log.exists():
        return 0
    return sum(1 for line in log.read_text().splitlines() if any(table in line for table in TOKEN_TABLES))


#: Each call of ``address()`` is a client network of its own: a random one could be the network
#: another test pushed past the bound (1 in 500 for two IPv4 draws), and be refused with 429.
_networks = itertools.count(1)


def address() -> str:
    """An IPv4 address or an IPv6 /64, in turn, that no other test here uses."""
    n = next(_networks)
    return f"198.51.100.{n}" if n % 2 else f"2001:db8:{n:x}::1"


def post(server, token, sender):
    """An initialize from ``sender`` (as the trusted proxy forwards it): 200 once the token passes."""
    client = HttpClient(server.url, token=token)
    params = {"protocolVersion": client.protocol_version, "capabilities": {},
              "clientInfo": {"name": "bad-tokens", "version": "0"}}
    return client.request("POST", client.message("initialize", params), headers={"X-Forwarded-For": sender},
                          session=False)


def random_token() -> str:
    return "mcp_" + secrets.token_urlsafe(32)  # the static tokens' prefix: both validators look it up


def test_random_tokens_cost_at_most_the_bound_of_lookups_then_429_before_any(probed):
    server, log = probed
    sender, before = address(), token_lookups(log)
    statuses = [post(server, random_token(), sender) for _ in range(BOUND + 6)]
    assert [reply.status for reply in statuses] == [401] * BOUND + [429] * 6
    assert 1 <= int(statuses[-1].headers["retry-after"]) <= 600
    assert "invalid tokens" in statuses[-1].json["error"]["message"]
    # Two lookups (both validators) for each of the first BOUND, none for the refused ones.
    assert token_lookups(log) - before == 2 * BOUND
    # Another address of the same IPv6 /64 (or the same IPv4 address) is the same network.
    if ":" in sender:
        assert post(server, random_token(), sender.replace("::1", "::2")).status == 429


def test_a_repeated_bad_token_is_looked_up_once(probed):
    server, log = probed
    sender, token, before = address(), random_token(), token_lookups(log)
    assert {post(server, token, sender).status for _ in range(10)} == {401}
    assert token_lookups(log) - before == 2


def test_a_known_token_works_from_a_network_past_the_bound_and_a_new_one_at_once(probed, server_env):
    server, log = probed
    sender, good = address(), new_token(server_env, "bad-token-neighbour")
    assert post(server, good, sender).status == 200  # validated, now cached
    for _ in range(BOUND + 1):
        post(server, random_token(), sender)
    assert post(server, random_token(), sender).status == 429
    assert post(server, good, sender).status == 200  # never refused because of the bound or the cache
    # A value refused first, then created as a token: it works at once (auth_created on the
    # control channel), though its refusal would be remembered for 600 s here.
    elsewhere, value = address(), random_token()
    assert post(server, value, elsewhere).status == 401
    code = ("from django.contrib.auth.models import User; from mcp_transport.models import McpToken\n"
            "user, _ = User.objects.get_or_create(username='bad-token-late')\n"
            f"row = McpToken(user=user, scope='mcp'); row.set_secret({value!r}); row.save()\n")
    subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT,
                   env={**os.environ, **server_env}, check=True, capture_output=True)
    eventually(lambda: _status_is(post(server, value, elsewhere), 200), deadline=5)


def _status_is(reply, status):
    assert reply.status == status, (reply.status, reply.body[:200])
