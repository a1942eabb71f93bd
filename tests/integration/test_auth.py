"""The OAuth 2.1 resource server (spec-checklist §1 R, F7, E7) on a real daphne with
``MCP_AUTH=on``: protected resource metadata, 401/403 challenges, static tokens made by
``manage.py mcp_tokens`` and django-oauth-toolkit tokens, revocation and expiry on the next
request, and sessions, replays and tasks bound to the principal that created them."""
import hashlib
import json
import os
import re
import secrets
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from urllib.request import urlopen

import pytest

from mcp_transport.testing import HttpClient

from .waiting import eventually

ROOT = Path(__file__).resolve().parents[2]

GET = {"Accept": "text/event-stream"}


def manage(server_env, *args) -> str:
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env={**os.environ, **server_env},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def new_token(server_env, user, *options) -> str:
    """``mcp_tokens create``: the token is alone on the last line."""
    return manage(server_env, "mcp_tokens", "create", "--user", user, *options).strip().splitlines()[-1]


@pytest.fixture(scope="module")
def alice(server_env):
    return new_token(server_env, "alice")


@pytest.fixture(scope="module")
def bob(server_env):
    return new_token(server_env, "bob")


def client_of(server, token):
    client = HttpClient(server.url, token=token)
    client.initialize()
    return client


def text_of(reply):
    assert "result" in reply, reply
    return reply["result"]["content"][0]["text"]


def challenge_params(header: str) -> dict:
    assert header.startswith("Bearer "), header
    params = {}
    for part in header[len("Bearer "):].split(", "):
        name, _, value = part.partition("=")
        params[name] = json.loads(value)
    return params


# -- metadata and challenges (R1-R3, R5, R7) ---------------------------------------------------

def test_protected_resource_metadata_path_and_root_forms(auth_server):
    origin = auth_server.url.rsplit("/mcp", 1)[0]
    for url in (f"{origin}/.well-known/oauth-protected-resource/mcp", f"{origin}/.well-known/oauth-protected-resource"):
        with urlopen(url, timeout=30) as response:
            assert response.status == 200
            assert response.headers["Content-Type"] == "application/json"
            document = json.loads(response.read())
        assert document == {"resource": auth_server.url, "authorization_servers": [origin],
                            "scopes_supported": ["mcp"], "bearer_methods_supported": ["header"]}


def test_metadata_is_404_while_auth_is_off(mcp_server):
    origin = mcp_server.url.rsplit("/mcp", 1)[0]
    with pytest.raises(Exception) as failure:
        urlopen(f"{origin}/.well-known/oauth-protected-resource/mcp", timeout=30)
    assert getattr(failure.value, "code", None) == 404


def test_no_token_is_401_with_the_metadata_url_and_scope(auth_server):
    client = HttpClient(auth_server.url)
    reply = client.request("POST", client.message("initialize", {"protocolVersion": "2025-11-25",
                                                                 "capabilities": {}, "clientInfo": {"name": "t"}}),
                           session=False)
    assert reply.status == 401, reply.body
    params = challenge_params(reply.headers["www-authenticate"])
    origin = auth_server.url.rsplit("/mcp", 1)[0]
    assert params == {"scope": "mcp", "resource_metadata": f"{origin}/.well-known/oauth-protected-resource/mcp"}
    assert "error" not in params  # RFC 6750 §3.1: no error code when no credentials were sent
    assert reply.json["error"]["code"] == -32600 and "id" not in reply.json
    with urlopen(params["resource_metadata"], timeout=30) as response:  # the 401 leads to the document
        assert json.loads(response.read())["resource"] == auth_server.url


@pytest.mark.parametrize("header", ["Bearer nonsense", "Bearer mcp_" + "x" * 43, "Basic YWxpY2U6cHc=", "Bearer",
                                    "Bearer a b"])
def test_bad_credentials_are_401(auth_server, header):
    client = HttpClient(auth_server.url)
    reply = client.request("POST", client.message("ping"), headers={"Authorization": header}, session=False)
    assert reply.status == 401
    params = challenge_params(reply.headers["www-authenticate"])
    assert params["resource_metadata"].endswith("/.well-known/oauth-protected-resource/mcp")
    if header.startswith("Bearer ") and " " not in header[7:]:
        assert params["error"] == "invalid_token"


def test_a_token_in_the_query_string_is_not_accepted(auth_server, alice):
    client = HttpClient(auth_server.url)
    client.path += f"?access_token={alice}"
    reply = client.request("POST", client.message("initialize", {"protocolVersion": "2025-11-25",
                                                                 "capabilities": {}, "clientInfo": {"name": "t"}}),
                           session=False)
    assert reply.status == 401


def test_every_request_needs_the_token_not_only_the_session(auth_server, alice):
    """R5: "authorization MUST be included in every HTTP request ... even if they are part of the
    same logical session"."""
    client = client_of(auth_server, alice)
    assert text_of(client.call("tools/call", {"name": "whoami"})) == "alice"
    anonymous = client.with_token(None)
    assert anonymous.request("POST", anonymous.message("tools/list")).status == 401
    assert anonymous.request("GET", headers=GET).status == 401
    assert anonymous.request("DELETE").status == 401
    assert client.request("POST", client.message("tools/list")).status == 200


def test_insufficient_scope_is_403_with_the_scope_to_ask_for(auth_server, server_env):
    token = new_token(server_env, "carol", "--scope", "reports")
    client = HttpClient(auth_server.url, token=token)
    reply = client.request("POST", client.message("ping"), session=False)
    assert reply.status == 403
    params = challenge_params(reply.headers["www-authenticate"])
    assert params["error"] == "insufficient_scope"
    assert set(params["scope"].split()) == {"mcp", "reports"}
    assert params["resource_metadata"].endswith("/.well-known/oauth-protected-resource/mcp")


# -- binding (F7, E7) --------------------------------------------------------------------------

def test_another_principal_presenting_the_session_id_gets_404(auth_server, alice, bob):
    client = client_of(auth_server, alice)
    swapped = client.with_token(bob)  # bob's valid token on alice's session
    assert swapped.request("POST", swapped.message("tools/list")).status == 404
    assert swapped.request("GET", headers=GET).status == 404
    assert swapped.request("DELETE").status == 404
    assert text_of(client.call("tools/call", {"name": "whoami"})) == "alice"  # untouched


def test_resumed_get_with_another_users_token_is_404_and_replays_nothing(auth_server, alice, bob):
    client = client_of(auth_server, alice)
    call = client.message("tools/call", {"name": "echo", "arguments": {"text": "alice's secret"}})
    events = client.stream("POST", call, headers={"Accept": "text/event-stream"}).events()
    priming = events[0].id
    swapped = client.with_token(bob).request("GET", headers={**GET, "Last-Event-ID": priming})
    assert swapped.status == 404 and b"secret" not in swapped.body
    # Bob's own session with alice's event id: nothing of hers (400, not 404).
    own = client_of(auth_server, bob)
    reply = own.request("GET", headers={**GET, "Last-Event-ID": priming})
    assert reply.status == 400 and b"secret" not in reply.body
    # Alice resumes her own stream.
    resumed = client.stream("GET", headers={**GET, "Last-Event-ID": priming})
    assert resumed.status == 200
    assert "alice's secret" in json.dumps(resumed.messages())


def test_ctx_user_is_the_token_user_in_inline_tools_and_workers(auth_server, celery_worker, bob):
    client = client_of(auth_server, bob)
    assert text_of(client.call("tools/call", {"name": "whoami"})) == "bob"
    assert text_of(client.call("tools/call", {"name": "whoami_job"})) == "bob"


def test_tasks_of_another_principal_are_unknown(auth_server, celery_worker, alice, bob):
    owner = client_of(auth_server, alice)
    created = owner.call("tools/call", {"name": "slow_job", "arguments": {"steps": 1, "interval_ms": 1},
                                        "task": {"ttl": 60000}})
    task_id = created["result"]["task"]["taskId"]
    stranger = client_of(auth_server, bob)
    unknown = stranger.call("tasks/get", {"taskId": "no-such-task"})["error"]
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        error = stranger.call(method, {"taskId": task_id})["error"]
        assert error == unknown, (method, error)
    assert task_id not in json.dumps(stranger.call("tasks/list"))
    assert owner.call("tasks/get", {"taskId": task_id})["result"]["taskId"] == task_id


# -- revocation and expiry take effect on the next request --------------------------------------

def test_revoked_static_token_is_refused_on_the_next_request_and_resume(auth_server, server_env):
    token = new_token(server_env, "dave")
    client = client_of(auth_server, token)
    events = client.stream("POST", client.message("tools/call", {"name": "echo", "arguments": {"text": "x"}}),
                           headers={"Accept": "text/event-stream"}).events()
    assert client.request("POST", client.message("ping")).status == 200  # cached now
    assert "Revoked." in manage(server_env, "mcp_tokens", "revoke", token)
    assert client.request("POST", client.message("ping")).status == 401
    assert client.request("GET", headers={**GET, "Last-Event-ID": events[0].id}).status == 401


def test_expired_static_token_is_refused_on_the_next_request_and_resume(auth_server, server_env):
    output = manage(server_env, "mcp_tokens", "create", "--user", "erin", "--expires", "6s").strip().splitlines()
    token, expires = output[-1], output[-2].split("expires ")[1].split(")")[0]
    deadline = datetime.fromisoformat(expires).timestamp()
    client = HttpClient(auth_server.url, token=token)
    first = client.request("POST", client.message("initialize", {"protocolVersion": "2025-11-25",
                                                                 "capabilities": {}, "clientInfo": {"name": "t"}}),
                           session=False)
    if time.time() >= deadline - 1:
        pytest.skip("the machine took the token's whole lifetime to serve one request")
    assert first.status == 200, first.body
    client.session_id = first.headers["mcp-session-id"]
    events = client.stream("POST", client.message("tools/call", {"name": "echo", "arguments": {"text": "x"}}),
                           headers={"Accept": "text/event-stream"}).events()
    while time.time() < deadline:
        time.sleep(0.1)
    assert client.request("POST", client.message("ping")).status == 401
    assert client.request("GET", headers={**GET, "Last-Event-ID": events[0].id}).status == 401


# -- django-oauth-toolkit access tokens ---------------------------------------------------------

TOOLKIT_TOKEN = """
from datetime import timedelta
from django.contrib.auth.models import User
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application
user, _ = User.objects.get_or_create(username={user!r})
app, _ = Application.objects.get_or_create(name="tests", defaults=dict(
    client_type="public", authorization_grant_type="authorization-code", redirect_uris="http://127.0.0.1/cb"))
AccessToken.objects.create(user=user, application=app, token={token!r}, scope={scope!r}, resource={resource!r},
                           expires=timezone.now() + timedelta(seconds={seconds}))
"""


def toolkit_token(server_env, token, *, user="frank", scope="mcp", resource=None, seconds=3600):
    manage(server_env, "shell", "-c", TOOLKIT_TOKEN.format(user=user, token=token, scope=scope,
                                                           resource=resource or [], seconds=seconds))
    return token


def test_toolkit_tokens_for_this_resource_are_accepted(auth_server, server_env):
    token = toolkit_token(server_env, f"dot-good-{secrets.token_hex(8)}", resource=[auth_server.url])
    client = client_of(auth_server, token)
    assert text_of(client.call("tools/call", {"name": "whoami"})) == "frank"


@pytest.mark.parametrize("resource, seconds", [
    ([], 3600),                                   # no RFC 8707 resource indicator at all
    (["https://other.example/mcp"], 3600),        # issued for another server
    (None, -10),                                  # expired (for this server)
])
def test_toolkit_tokens_for_another_audience_or_expired_are_401(auth_server, server_env, resource, seconds):
    token = f"dot-bad-{len(resource or [])}-{seconds}-{secrets.token_hex(8)}"
    toolkit_token(server_env, token, resource=[auth_server.url] if resource is None else resource, seconds=seconds)
    client = HttpClient(auth_server.url, token=token)
    reply = client.request("POST", client.message("ping"), session=False)
    assert reply.status == 401
    assert challenge_params(reply.headers["www-authenticate"])["error"] == "invalid_token"


def test_revoked_toolkit_token_is_refused_on_the_next_request(auth_server, server_env):
    token = toolkit_token(server_env, f"dot-revoked-{secrets.token_hex(8)}", resource=[auth_server.url])
    client = client_of(auth_server, token)
    assert client.request("POST", client.message("ping")).status == 200
    manage(server_env, "shell", "-c",
           "import hashlib; from oauth2_provider.models import AccessToken; "
           f"AccessToken.objects.get(token_checksum=hashlib.sha256({token!r}.encode()).hexdigest()).revoke()")
    assert client.request("POST", client.message("ping")).status == 401


# -- per-tool authorization ---------------------------------------------------------------------

GRANT = """
from django.contrib.auth.models import Permission, User
user, _ = User.objects.get_or_create(username={user!r})
user.user_permissions.add(Permission.objects.get(content_type__app_label="auth", codename="view_user"))
"""


def names(client, method, key, field="name"):
    return {item[field] for item in client.call(method)["result"][key]}


def test_tools_resources_and_prompts_the_caller_may_not_use_are_absent_and_refused(auth_server, server_env,
                                                                                    alice, celery_worker):
    client = client_of(auth_server, alice)  # scope "mcp", no permissions
    assert {"sales_report", "count_users"}.isdisjoint(names(client, "tools/list", "tools"))
    assert "echo" in names(client, "tools/list", "tools")
    assert "users://directory" not in names(client, "resources/list", "resources", "uri")
    assert "report_summary" not in names(client, "prompts/list", "prompts")
    # Permission: as unknown as a tool that does not exist (inline and background paths alike).
    unknown = client.call("tools/call", {"name": "no_such_tool"})["error"]
    refused = client.call("tools/call", {"name": "count_users"})["error"]
    assert (refused["code"], refused["message"].replace("count_users", "no_such_tool")) == \
        (unknown["code"], unknown["message"])
    assert client.call("resources/read", {"uri": "users://directory"})["error"]["code"] == -32002
    # Nor may it subscribe to what it may not read: answered as the read is.
    assert client.call("resources/subscribe", {"uri": "users://directory"})["error"]["code"] == -32002
    # Scopes: 403 insufficient_scope naming the scope to ask for (step-up authorization).
    reply = client.request("POST", client.message("tools/call", {"name": "sales_report",
                                                                 "arguments": {"day": "2026-01-01"}}))
    assert reply.status == 403
    params = challenge_params(reply.headers["www-authenticate"])
    assert params["error"] == "insufficient_scope" and set(params["scope"].split()) == {"mcp", "reports"}
    reply = client.request("POST", client.message("prompts/get", {"name": "report_summary",
                                                                  "arguments": {"day": "x"}}))
    assert reply.status == 403


def test_the_right_scope_and_permission_open_them(auth_server, server_env, celery_worker):
    manage(server_env, "shell", "-c", GRANT.format(user="grace"))
    client = client_of(auth_server, new_token(server_env, "grace", "--scope", "mcp reports"))
    assert {"sales_report", "count_users"} <= names(client, "tools/list", "tools")
    assert "users://directory" in names(client, "resources/list", "resources", "uri")
    assert "report_summary" in names(client, "prompts/list", "prompts")
    assert text_of(client.call("tools/call", {"name": "sales_report", "arguments": {"day": "d"}})) == "Sales on d: 42."
    assert text_of(client.call("tools/call", {"name": "count_users"})).endswith(" users")
    directory = client.call("resources/read", {"uri": "users://directory"})["result"]["contents"][0]["text"]
    assert "grace" in directory.split("\n")
    assert client.call("resources/subscribe", {"uri": "users://directory"})["result"] == {}
    assert client.call("prompts/get", {"name": "report_summary", "arguments": {"day": "d"}})["result"]["messages"]


def test_permission_tools_are_hidden_with_auth_off_for_anonymous_callers(session):
    tools = {tool["name"] for tool in session.call("tools/list")["result"]["tools"]}
    assert "count_users" not in tools
    assert "sales_report" in tools  # scopes are a token's: with auth off they do not apply


# -- the official SDK client with a bearer token ------------------------------------------------

@pytest.mark.asyncio
@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
async def test_the_sdk_client_with_a_bearer_header(connect_as, alice, bob):
    async with connect_as(alice, "legacy") as client:
        assert client.protocol_version == "2025-11-25"
        assert (await client.call_tool("whoami", {})).content[0].text == "alice"
        assert (await client.call_tool("echo", {"text": "hi"})).structured_content == {"result": "hi"}
        assert "count_users" not in {tool.name for tool in (await client.list_tools()).tools}
    async with connect_as(bob, "auto") as client:  # 2026-07-28: every request stateless
        assert client.protocol_version == "2026-07-28"
        assert (await client.call_tool("whoami", {})).content[0].text == "bob"
        assert "count_users" not in {tool.name for tool in (await client.list_tools()).tools}
    with pytest.raises(Exception):  # no token: the 401 ends the connection attempt
        async with connect_as("not-a-token", "legacy") as client:
            await client.list_tools()


def test_trusting_memory_for_revocable_tokens_still_drops_them_on_revocation(start_server, server_env):
    """AUTH_REVOCABLE_MEMORY_SECONDS: the process keeps the token in memory (no Redis read per
    request), and a revocation's control message makes every process forget it at once."""
    server = start_server(MCP_AUTH="on", MCP_TRANSPORT_JSON=json.dumps({"AUTH_REVOCABLE_MEMORY_SECONDS": 300}))
    token = new_token(server_env, "henry")
    client = client_of(server, token)
    assert client.request("POST", client.message("ping")).status == 200
    digest = hashlib.sha256(token.encode()).hexdigest()
    # Revoked behind the app's back (no signal, the Redis entry simply gone): only memory knows it.
    manage(server_env, "shell", "-c", "from django.utils import timezone; from mcp_transport.models import McpToken; "
           "from mcp_transport.connections import keys, sync_redis; "
           f"McpToken.objects.filter(digest={digest!r}).update(revoked_at=timezone.now()); "
           f"sync_redis().delete(keys().auth_token({digest!r}))")
    assert client.request("POST", client.message("ping")).status == 200  # served from memory
    manage(server_env, "shell", "-c", f"from mcp_transport import auth; auth.revoked([{digest!r}])")
    deadline = time.monotonic() + 30  # far less than the 300 s the memory would keep it
    while client.request("POST", client.message("ping")).status != 401:
        assert time.monotonic() < deadline, "the revocation never reached the process's memory"
        time.sleep(0.05)


# -- the admin: static tokens, and each session's user ------------------------------------------

def test_admin_creates_lists_and_revokes_tokens_and_shows_session_users(auth_server, admin_login, server_env):
    from .test_admin import Admin

    admin = Admin(auth_server, admin_login)
    kate = new_token(server_env, "kate")  # makes the user the form below picks
    assert client_of(auth_server, kate).call("ping")["result"] == {}  # listed once it did something

    def listed():
        assert "kate" in admin.get("/admin/mcp_transport/mcpsession/?q=kate")[1]  # the session's user
    eventually(listed)  # its row is written behind its first request
    user_id = manage(server_env, "shell", "-c",
                     "from django.contrib.auth.models import User; print(User.objects.get(username='kate').pk)")
    status, html = admin.send("/admin/mcp_transport/mcptoken/add/", {
        "user": user_id.split()[-1], "name": "from the admin", "scope": "mcp", "expires_at_0": "", "expires_at_1": "",
        "csrfmiddlewaretoken": admin.csrf, "_save": "Save"})
    assert status == 200 and "shown only now" in html, re.findall(r'class="errorlist.*?</ul>', html, re.S) or html[:500]
    token = re.search(r"shown only now: (mcp_[A-Za-z0-9_-]+)", html).group(1)
    client = client_of(auth_server, token)
    assert text_of(client.call("tools/call", {"name": "whoami"})) == "kate"
    listing = admin.get("/admin/mcp_transport/mcptoken/?q=from+the+admin")[1]
    assert token[:12] in listing and token not in listing  # the prefix, never the token
    token_id = re.search(r'name="_selected_action" value="(\d+)"', listing).group(1)
    status, html = admin.send("/admin/mcp_transport/mcptoken/", {
        "action": "revoke", "_selected_action": token_id, "csrfmiddlewaretoken": admin.csrf, "index": "0"})
    assert status == 200 and "Revoked 1 token(s)." in html
    assert client.request("POST", client.message("ping")).status == 401  # the next request


def test_mcp_tokens_list_and_bad_input(server_env):
    token = new_token(server_env, "lena", "--scope", "mcp reports", "--expires", "2w", "--name", "nightly")
    listing = manage(server_env, "mcp_tokens", "list", "--user", "lena")
    assert token[:12] in listing and token not in listing and "active" in listing and "nightly" in listing
    for args in (("create", "--user", "lena", "--expires", "soon"), ("revoke", "mcp_not-a-token")):
        done = subprocess.run([sys.executable, "manage.py", "mcp_tokens", *args], cwd=ROOT,
                              env={**os.environ, **server_env}, capture_output=True, text=True, timeout=120)
        # One sentence, no traceback (the W007 warning of this open test environment may come first).
        assert done.returncode == 1 and "CommandError: " in done.stderr and "Traceback" not in done.stderr, done


# -- streams end with their token -----------------------------------------------------------------

LISTEN = {"notifications": {"toolsListChanged": True}}


def read_until_closed(stream, deadline):
    """Every event of ``stream`` until the server ends it, failing at ``deadline`` (monotonic):
    keep-alive comments alone never end the wait."""
    events, stream._pending = stream._pending, []
    while True:
        stream.connection.sock.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            chunk = stream.response.read1(65536)
        except TimeoutError:
            raise AssertionError(f"the stream is still open after its token ended: {stream.raw[-300:]!r}") from None
        assert time.monotonic() < deadline, f"the stream is still open after its token ended: {stream.raw[-300:]!r}"
        if not chunk:
            return events
        stream.raw += chunk
        events.extend(stream.decoder.feed(chunk))


def open_streams(server, token):
    """The three streams a client keeps open: a 2025-11-25 GET stream, a 2026-07-28
    subscriptions/listen, and a 2024-11-05 HTTP+SSE stream, each with ``token``."""
    from mcp_transport.testing import ModernClient

    from .test_http_sse import SseConnection

    legacy = client_of(server, token)
    get = legacy.stream("GET", headers=GET)
    assert get.status == 200 and get.next_event().id  # the priming event
    modern = ModernClient(server.url)
    modern.token = token
    listen = modern.open("subscriptions/listen", LISTEN)
    assert listen.status == 200, listen.response.read()
    assert json.loads(listen.next_event().data)["method"] == "notifications/subscriptions/acknowledged"
    sse = SseConnection(server, {"Authorization": f"Bearer {token}"})
    assert sse.response.status == 200 and sse.next().event == "endpoint"
    return legacy, get, listen, sse


def assert_ended_cleanly(legacy, get, listen, sse, deadline):
    """Each stream ends so that the client can act: the GET stream and the HTTP+SSE stream with
    a retry field (the client comes back, gets the 401, authorizes, resumes), the listen with
    its graceful complete result; the resume with the old token is refused."""
    read_until_closed(get, deadline)
    assert get.raw.endswith(b"retry: 1000\n\n"), get.raw[-200:]  # a closing frame: come back in a second
    assert legacy.request("GET", headers={**GET, "Last-Event-ID": get.last_event_id}).status == 401
    final = json.loads(read_until_closed(listen, deadline)[-1].data)
    assert final["result"]["resultType"] == "complete", final
    rest = b""
    while True:
        sse.connection.sock.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            chunk = sse.response.read1(65536)
        except TimeoutError:
            raise AssertionError("the HTTP+SSE stream is still open after its token ended") from None
        assert time.monotonic() < deadline, "the HTTP+SSE stream is still open after its token ended"
        if not chunk:
            break
        rest += chunk
    assert rest.endswith(b"retry: 1000\n\n"), rest[-200:]


def test_revoking_a_token_ends_its_open_streams_on_every_transport(auth_server, server_env):
    """"refused from the next request on" holds for a stream that is already open: the GET
    stream, a subscriptions/listen and an HTTP+SSE stream end soon after ``mcp_tokens revoke``."""
    token = new_token(server_env, "rita")
    streams = open_streams(auth_server, token)
    assert "Revoked." in manage(server_env, "mcp_tokens", "revoke", token)
    assert_ended_cleanly(*streams, deadline=time.monotonic() + 20)


def test_revoking_a_token_ends_a_resumed_get_stream(auth_server, server_env):
    """A GET stream resumed with Last-Event-ID (its replay queued before the headers, to be
    charged to the replay budget) watches its token as a new one does: it kept sending
    keep-alives after the revocation when the resume made its writer without the principal."""
    token = new_token(server_env, "rosa")
    legacy = client_of(auth_server, token)
    first = legacy.stream("GET", headers=GET)
    assert first.status == 200 and first.next_event().id  # the priming event
    first.close()
    resumed = legacy.resume(first.last_event_id)
    assert resumed.status == 200, resumed.response.read()
    assert "Revoked." in manage(server_env, "mcp_tokens", "revoke", token)
    read_until_closed(resumed, time.monotonic() + 20)
    assert resumed.raw.endswith(b"retry: 1000\n\n"), resumed.raw[-200:]
    assert legacy.request("GET", headers={**GET, "Last-Event-ID": first.last_event_id}).status == 401


def test_a_toolkit_token_expiring_ends_its_open_streams(auth_server, server_env):
    """The streams know their token's expiry and end then, with no request to notice it."""
    lifetime = 8
    token = toolkit_token(server_env, f"dot-expiring-{secrets.token_hex(8)}", user="tom",
                          resource=[auth_server.url, auth_server.url.rsplit("/mcp", 1)[0] + "/sse"],
                          seconds=lifetime)
    created = time.monotonic()
    try:
        streams = open_streams(auth_server, token)
    except AssertionError:
        if time.monotonic() - created >= lifetime - 1:
            pytest.skip("the machine took the token's whole lifetime to open the streams")
        raise
    assert_ended_cleanly(*streams, deadline=created + lifetime + 20)
