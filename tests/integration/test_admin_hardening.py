"""The admin's operations hardening, against a live daphne server: the MCP pages need the app's
view permissions (not just staff), logins are throttled (django-axes), and the lists show
shortened session and job ids (the full id, a session's credential or a task's handle, only on
the object's own page), and name rows by references a forged one cannot stand for."""
import http.cookiejar
import json
import os
import re
import secrets
import subprocess
import sys
import urllib.request

import pytest
from django.contrib.admin.utils import quote

from mcp_transport.admin.refs import session_ref
from mcp_transport.testing import HttpClient

from .test_admin import Admin
from .waiting import eventually
from .test_admin_jobs import job_row, running_task, task_status

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PASSWORD = "hardening-password-for-tests"
DASHBOARD = "/admin/mcp_transport/mcpsession/dashboard/"
PROGRESS = "/admin/mcp_transport/mcpjob/progress/?id=x"
SKILLS = "/admin/mcp_transport/mcpsession/skills/"


@pytest.fixture(scope="module")
def server(start_server):
    return start_server()


def make_staff(server_env, username, *permissions):
    """A staff user (not a superuser) with only ``permissions`` (codenames of mcp_transport)."""
    code = ("from django.contrib.auth.models import Permission, User; "
            f"user = User.objects.filter(username={username!r}).first() or "
            f"User.objects.create_user({username!r}, password={PASSWORD!r}, is_staff=True); "
            f"user.user_permissions.set(Permission.objects.filter(content_type__app_label='mcp_transport', "
            f"codename__in={list(permissions)!r}))")
    subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env={**os.environ, **server_env},
                   check=True, capture_output=True)
    return username, PASSWORD


def test_staff_without_the_apps_permissions_sees_no_mcp_page(server, server_env):
    staff = Admin(server, make_staff(server_env, "staff-no-mcp"))
    for url in (DASHBOARD, PROGRESS, SKILLS, "/admin/mcp_transport/mcpsession/", "/admin/mcp_transport/mcpjob/"):
        status, _html = staff.get(url)
        assert status == 403, url


def test_the_skills_page_needs_any_permission_of_the_app(server, server_env):
    calls = Admin(server, make_staff(server_env, "staff-calls", "view_mcpcall"))
    status, html = calls.get(SKILLS)
    assert status == 200 and "skill://library-catalog/SKILL.md" in html


def test_the_dashboard_needs_the_session_view_permission_and_job_charts_the_jobs(server, server_env):
    viewer = Admin(server, make_staff(server_env, "staff-sessions", "view_mcpsession"))
    status, html = viewer.get(DASHBOARD)
    assert status == 200 and "<h3>Concurrent streams</h3>" in html
    assert "Jobs running" not in html and "Job" not in "".join(re.findall(r"<h3>([^<]+)</h3>", html))
    assert viewer.get(PROGRESS)[0] == 403

    both = Admin(server, make_staff(server_env, "staff-both", "view_mcpsession", "view_mcpjob"))
    status, html = both.get(DASHBOARD)
    assert status == 200 and "Job" in "".join(re.findall(r"<h3>([^<]+)</h3>", html))
    assert both.get(PROGRESS)[0] == 200


def test_repeated_failed_logins_lock_that_username_out(server, server_env, admin_login):
    username, password = make_staff(server_env, f"staff-guessed-{secrets.token_hex(4)}", "view_mcpsession")
    statuses = [_login(server, username, f"wrong-{attempt}") for attempt in range(5)]
    assert statuses == [200] * 4 + [429]  # the form again with its error, then locked out (the 5th)
    assert _login(server, username, password) == 429  # even the right password, until the cool-off
    Admin(server, admin_login)  # another username from the same address still logs in


def _login(server, username, password) -> int:
    """POST the admin login form once, in a fresh cookie jar: the HTTP status."""
    admin = object.__new__(Admin)
    admin.server, admin.base = server, server.url.removesuffix("/mcp")
    admin.cookies = http.cookiejar.CookieJar()
    admin.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(admin.cookies))
    admin.get("/admin/login/")
    status, html = admin.send("/admin/login/?next=/admin/", {
        "username": username, "password": password, "csrfmiddlewaretoken": admin.csrf, "next": "/admin/"})
    assert status != 200 or "Log out" not in html
    return status


def test_lists_show_short_session_ids_and_the_session_page_the_full_one(server, admin_login):
    client = HttpClient(server.url)
    client.initialize()
    assert client.call("ping")["result"] == {}  # listed once it did something
    session_id = client.session_id
    admin = Admin(server, admin_login)

    def shown():  # what the page shows (its text and tooltips; links and action checkboxes carry the key)
        html = re.sub(r'\s(href|value)="[^"]*"', "", admin.page("/admin/mcp_transport/mcpsession/", q=session_id[:8]))
        assert f"<code>{session_id[:8]}…</code>" in html  # once its row is written (behind its ping)
        return html
    shown = eventually(shown)
    assert session_id[:9] not in shown
    assert session_id in admin.page(f"/admin/mcp_transport/mcpsession/{quote(session_id)}/change/")


LIST = "/admin/mcp_transport/mcpsession/"


def _listed(html, session_id):
    assert f"<code>{session_id[:8]}…</code>" in html


def test_the_session_list_html_carries_no_full_session_id(server, admin_login):
    """Not as text, nor in the rows' links or action checkboxes (a changelist puts the primary
    key there), nor in a popup list: at most the 8 characters the list shows. The links still
    open the session page, and the checkboxes still select sessions for an action."""
    clients = [HttpClient(server.url) for _ in range(3)]
    for client in clients:
        client.initialize()
        assert client.call("ping")["result"] == {}  # listed once it did something
    admin = Admin(server, admin_login)
    for client in clients:  # once their rows are written (behind their first request)
        eventually(lambda: _listed(admin.page(LIST, q=client.session_id[:8]), client.session_id))
    pages = [admin.page(LIST), admin.page(LIST, q=clients[0].session_id[:8]), admin.page(LIST, _popup=1)]
    for html in pages:
        for client in clients:
            for form in (client.session_id[:9], quote(client.session_id[:9])):
                assert form not in html, html[html.index(form) - 300:html.index(form) + 100]
    target = clients[0].session_id
    row = re.search(r'<tr>(?:(?!</tr>).)*?<code>%s…</code>(?:(?!</tr>).)*</tr>' % re.escape(target[:8]), pages[1], re.S)
    link = re.search(r'href="(/admin/mcp_transport/mcpsession/[^"?]+/change/)[?"]', row.group(0)).group(1)
    assert target in admin.page(link)  # the full id, on the session page only
    selected = re.search(r'name="_selected_action" value="([^"]+)"', row.group(0)).group(1)
    html = admin.post(LIST, {"action": "terminate_sessions", "index": 0, "select_across": 0,
                             "_selected_action": [selected]})
    assert "Terminated 1 session(s)." in html
    assert clients[0].request("POST", clients[0].message("ping")).status == 404
    assert clients[1].request("POST", clients[1].message("ping")).status == 200


JOBS = "/admin/mcp_transport/mcpjob/"


def test_a_forged_job_reference_names_nothing(server, admin_login, celery_worker):
    """A reference with the job's prefix and a wrong tag, or a session's reference of the same id
    (another salt), opens no page, cancels nothing and reads no progress; the real one does."""
    client, task_id = running_task(server)
    admin = Admin(server, admin_login)
    row = job_row(admin.page(JOBS, q=task_id[:8]), task_id)
    real = re.search(r'name="_selected_action" value="([^"]+)"', row).group(1)
    forged = [f"{task_id[:8]}.{'0' * 24}", session_ref(task_id)]
    assert real not in forged
    for reference in forged:
        assert admin.get(f"{JOBS}{quote(reference)}/change/")[0] == 404
        assert admin.send(f"{JOBS}{quote(reference)}/cancel/", {"csrfmiddlewaretoken": admin.csrf})[0] == 404
        assert json.loads(admin.page(f"{JOBS}progress/", id=reference)) == {"jobs": {}}
        html = admin.post(JOBS, {"action": "cancel_jobs", "index": 0, "select_across": 0,
                                 "_selected_action": [reference]})
        assert "No items have been changed." in html and "Cancelled 1 job(s)" not in html
        assert task_status(client, task_id) == "working"  # what a queued job is to a client too
    assert "Job cancelled." in admin.post(f"{JOBS}{quote(real)}/cancel/", {})
    assert task_status(client, task_id) == "cancelled"
