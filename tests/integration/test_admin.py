"""The admin against a live daphne server, with data made by real MCP traffic: the session
list, a session page, the terminate and purge actions, the dashboard and the skills.

The server flushes counters and takes dashboard samples every half second here, so what
traffic did shows up within a second.
"""
import json
import re
import time
from pathlib import Path

import http.client
import http.cookiejar
import urllib.error
import urllib.parse
import urllib.request

from django.contrib.admin.utils import quote

from mcp_transport.admin.refs import session_ref
from mcp_transport.protocol.skills import digest
from mcp_transport.testing import HttpClient

from .waiting import eventually

ROOT = Path(__file__).resolve().parents[2]

GET = {"Accept": "text/event-stream"}
FAST = json.dumps({"HEARTBEAT_SECONDS": 0.3, "DASHBOARD_SAMPLE_SECONDS": 0.3})
#: Long enough for a flush of counters and a sample (every 0.3 s here).
SETTLE = 1.2


class Admin:
    """A logged-in admin user over HTTP (stdlib: cookies, CSRF token, redirects followed)."""

    def __init__(self, server, login):
        self.server, self.base = server, server.url.removesuffix("/mcp")
        self.cookies = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.cookies))
        self.get("/admin/login/")
        status, html = self.send("/admin/login/?next=/admin/", {
            "username": login[0], "password": login[1], "csrfmiddlewaretoken": self.csrf, "next": "/admin/"})
        assert status == 200 and "Log out" in html, html[:500]

    @property
    def csrf(self):
        return next(cookie.value for cookie in self.cookies if cookie.name == "csrftoken")

    def send(self, url, data=None):
        body = urllib.parse.urlencode(data, doseq=True).encode() if data is not None else None
        try:
            with self.opener.open(self.base + url, body, timeout=30) as reply:
                return reply.status, reply.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode(errors="replace")

    def get(self, url):
        return self.send(url)

    def page(self, url, **params) -> str:
        url = f"{url}?{urllib.parse.urlencode(params)}" if params else url
        status, html = self.send(url)
        assert status == 200, (url, status, html[:500], self.server.log()[-4000:])
        return html

    def post(self, url, data) -> str:
        status, html = self.send(url, {**data, "csrfmiddlewaretoken": self.csrf})
        assert status == 200, (url, status, html[:500], self.server.log()[-4000:])
        return html

    def action(self, name, session_ids) -> str:
        """An action on sessions, selected as the list's checkboxes select them (by reference)."""
        return self.post("/admin/mcp_transport/mcpsession/",
                         {"action": name, "index": 0, "select_across": 0,
                          "_selected_action": [session_ref(session_id) for session_id in session_ids]})


def _progress_call(client, steps, interval_ms=1):
    return client.message("tools/call", {"name": "slow_progress", "_meta": {"progressToken": "p"},
                                         "arguments": {"steps": steps, "interval_ms": interval_ms}})


def _session_with_history(server, steps=60):
    """A session with a finished progress call (steps + 2 events), resumed once and once with
    an id that names nothing."""
    client = HttpClient(server.url)
    client.initialize()
    stream = client.stream("POST", _progress_call(client, steps))
    priming = stream.next_event()
    stream.close()
    replayed = client.stream("GET", headers={**GET, "Last-Event-ID": priming.id}).messages()
    assert replayed[-1]["result"]["content"][0]["text"] == f"done {steps}"
    assert client.request("GET", headers={**GET, "Last-Event-ID": "0123456789abcdef.1-0"}).status == 400
    return client


def session_url(session_id) -> str:
    """A session's admin URL, its id quoted as the admin quotes primary keys ("_" is special)."""
    return f"/admin/mcp_transport/mcpsession/{quote(session_id)}"


def listed_url(session_id) -> str:
    """The URL the lists link a session's page with: by reference, never by id."""
    return f"/admin/mcp_transport/mcpsession/{quote(session_ref(session_id))}"


def _row(html, key) -> str:
    """The changelist row of a session (its checkbox holds its reference) or of a job (its id)."""
    value = "(?:%s|%s)" % (re.escape(session_ref(key)), re.escape(key))
    match = re.search(r'<tr>(?:(?!</tr>).)*?value="%s"(?:(?!</tr>).)*</tr>' % value, html, re.S)
    assert match, f"no row for {key}"
    return match.group(0)


def listed(html, session_id) -> bool:
    return f'value="{session_ref(session_id)}"' in html


def _listed_only(html, session_id, other_id) -> str:
    assert listed(html, session_id) and not listed(html, other_id)
    return html


def _assert(condition):
    assert condition


def _cells(row) -> list:
    return [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)]


def test_session_list_shows_live_counters_of_real_traffic(admin_server, admin):
    client = _session_with_history(admin_server)

    def counters_shown():  # once the processes have flushed their counters
        html = admin.page("/admin/mcp_transport/mcpsession/", q=client.session_id[:12])
        cells = _cells(_row(html, client.session_id))
        # checkbox, id, user, client, version, created, last seen, state, open, buffered, replays, resumes
        assert cells[1] == client.session_id[:8] + "…"
        assert cells[3] == "mcp-transport-tests 0" and cells[4] == "2025-11-25"
        assert cells[7] == "ready"
        assert cells[8] == "0"  # nothing streams now
        assert int(cells[9]) == 60 + 2  # priming, 60 progress, the result
        assert cells[10] == "1 (1)" and cells[11] == "2"
    eventually(counters_shown)


def test_session_list_filters_and_search(admin_server, admin):
    streaming, idle = HttpClient(admin_server.url), HttpClient(admin_server.url)
    streaming.initialize()
    idle.initialize()
    held = streaming.stream("GET", headers=GET)  # the standalone stream, held open
    held.next_event()
    assert idle.call("ping")["result"] == {}  # it did something: it is listed (a session that did not is not)
    idle.delete()
    time.sleep(SETTLE)
    live = admin.page("/admin/mcp_transport/mcpsession/", streaming="yes")
    assert listed(live, streaming.session_id) and not listed(live, idle.session_id)
    assert _cells(_row(live, streaming.session_id))[8] == "1"
    # The DELETE's row is written behind it (issue 32): closed within moments.
    closed = eventually(lambda: _listed_only(admin.page("/admin/mcp_transport/mcpsession/", state__exact="closed"),
                                             idle.session_id, streaming.session_id))
    assert "closed (deleted)" in _row(closed, idle.session_id)
    found = admin.page("/admin/mcp_transport/mcpsession/", q=idle.session_id[:10])
    assert listed(found, idle.session_id) and not listed(found, streaming.session_id)
    held.close()


def test_the_lists_link_opens_the_page_of_a_session_whose_id_holds_an_underscore(admin_server, admin):
    """The admin quotes "_" in primary keys (token_urlsafe ids hold one 4 times in 10): the
    session page, its actions and the jobs list's links must read them back."""
    for _ in range(40):
        client = HttpClient(admin_server.url)
        client.initialize()
        if "_" in client.session_id:
            break
    assert "_" in client.session_id
    assert client.call("ping")["result"] == {}  # listed once it did something
    # Its row is written behind its initialize (issue 32): listed within moments.
    row = eventually(lambda: _row(admin.page("/admin/mcp_transport/mcpsession/", q=client.session_id[:12]),
                                  client.session_id))
    link = re.search(r'href="(/admin/mcp_transport/mcpsession/[^"?]+/change/)', row).group(1)
    assert link == f"{listed_url(client.session_id)}/change/"
    assert client.session_id in admin.page(link)
    after_purge = admin.post(f"{listed_url(client.session_id)}/purge/", {})  # redirected to the session page
    assert "Buffered events purged." in after_purge and client.session_id in after_purge


def test_session_page_lists_streams_and_events_newest_first_paginated(admin_server, admin):
    client = _session_with_history(admin_server, steps=60)
    url = f"{session_url(client.session_id)}/change/"

    def first_page():  # once the batched event rows are written
        html = admin.page(url)
        assert "POST request" in html and "answered" in html
        first = re.findall(r"<code>([0-9a-f]{16}\.[0-9]+-[0-9]+)</code>", html)
        assert len(first) == 50  # one page
        return html, first
    html, first = eventually(first_page)
    assert "response to 2" in html.split("Buffered events")[1].split("notifications/progress")[0]  # the result on top
    assert "&quot;progress&quot;: 60" in html  # pretty-printed JSON (indent=2)
    older = admin.page(url, page=2)
    rest = re.findall(r"<code>([0-9a-f]{16}\.[0-9]+-[0-9]+)</code>", older)
    assert len(rest) == 12 and not set(rest) & set(first)
    positions = [tuple(map(int, event_id.split(".")[1].split("-"))) for event_id in first + rest]
    assert positions == sorted(positions, reverse=True)
    assert "priming event" in older


def test_terminate_action_ends_open_streams_and_later_requests_get_404(admin_server, admin):
    client = HttpClient(admin_server.url)
    client.initialize()
    held = client.stream("GET", headers=GET)
    held.next_event()
    call = client.stream("POST", _progress_call(client, steps=200, interval_ms=100))
    call.next_event()
    idle, gone = HttpClient(admin_server.url), HttpClient(admin_server.url)
    for listed_client in (idle, gone):  # each did something: listed
        listed_client.initialize()
        assert listed_client.call("ping")["result"] == {}
    gone.delete()
    time.sleep(SETTLE)
    html = admin.action("terminate_sessions", [client.session_id, idle.session_id, gone.session_id])
    assert "Terminated 2 session" in html  # the deleted one was closed already
    assert idle.request("POST", idle.message("ping")).status == 404
    assert held.events(timeout=10) == [] and held.closed_by_server
    sent = [json.loads(event.data) for event in call.events(timeout=10) if event.data]
    assert call.closed_by_server  # the running call's stream ended too, long before its 200 steps
    assert len(sent) < 100 and all(message.get("method") == "notifications/progress" for message in sent)
    assert client.request("POST", client.message("ping")).status == 404
    assert "closed (terminated)" in admin.page("/admin/mcp_transport/mcpsession/", q=client.session_id[:12])


def test_purge_action_drops_buffers_and_rows(admin_server, admin):
    client = _session_with_history(admin_server, steps=5)
    eventually(lambda: _assert("No stored events" not in admin.page(f"{session_url(client.session_id)}/change/")))
    html = admin.action("purge_buffers", [client.session_id])
    assert "Purged the buffers of 1 session(s)" in html
    page = admin.page(f"{session_url(client.session_id)}/change/")
    assert "No stored events" in page and "No stream keeps events" in page
    assert _cells(_row(admin.page("/admin/mcp_transport/mcpsession/", q=client.session_id[:12]),
                       client.session_id))[9] == "0"
    # The session itself lives on.
    assert client.request("POST", client.message("ping")).status == 200


def test_session_page_buttons_terminate_and_purge(admin_server, admin):
    client = _session_with_history(admin_server, steps=3)
    time.sleep(SETTLE)
    base = session_url(client.session_id)
    assert "Buffered events purged" in admin.post(f"{base}/purge/", {})
    assert "No stored events" in admin.page(f"{base}/change/")
    assert "Session terminated" in admin.post(f"{base}/terminate/", {})
    assert client.request("POST", client.message("ping")).status == 404
    assert admin.get(f"{base}/terminate/")[0] == 405


def test_dashboard_shows_current_values_and_charts(admin_server, admin):
    for _ in range(3):
        _session_with_history(admin_server, steps=2)
        time.sleep(SETTLE / 2)  # samples in more than one slot, for lines rather than points

    def dashboard():  # once counters are flushed and sampled
        html = admin.page("/admin/mcp_transport/mcpsession/dashboard/")
        for title in ("Reconnects per minute", "Share of reconnects with Last-Event-ID", "Replays per minute",
                      "Replay hit rate", "Buffered events", "Evictions per minute, by reason", "Sessions per minute",
                      "Concurrent streams"):
            assert f"<h3>{title}</h3>" in html
        assert html.count("<polyline") >= 8
        values = dict(re.findall(r'<div class="label">([^<]+)</div><div class="value">([^<]+)</div>', html))
        assert int(values["Reconnects (GET)"].replace(",", "")) >= 6
        assert int(values["Replays"].split()[0].replace(",", "")) >= 3
    eventually(dashboard)


def test_the_skills_page_lists_each_skill_with_who_sees_it_and_its_files(admin):
    html = admin.page("/admin/mcp_transport/mcpsession/skills/")
    for uri in ("skill://library-catalog/SKILL.md", "skill://library-curation/SKILL.md"):
        assert f"<code>{uri}</code>" in html
    assert "every caller" in html and "permission library.change_book" in html
    assert "app tools.library" in html and "<code>references/TOOLS.md</code>" in html
    tools = ROOT / "tools" / "library" / "skills" / "library-catalog" / "references" / "TOOLS.md"
    assert digest(tools.read_bytes()) in html
    assert 'href="/admin/mcp_transport/mcpsession/skills/">Skills</a>' in admin.page("/admin/mcp_transport/")


def test_pages_need_a_staff_login(admin_server):
    for url in ("/admin/mcp_transport/mcpsession/", "/admin/mcp_transport/mcpsession/dashboard/",
                "/admin/mcp_transport/mcpsession/skills/"):
        connection = http.client.HTTPConnection("127.0.0.1", admin_server.port, timeout=30)
        connection.request("GET", url)
        reply = connection.getresponse()
        assert reply.status == 302 and "/admin/login/" in reply.getheader("location")
        connection.close()
