"""Admin links to sessions quote the id as Django's admin quotes primary keys: a token_urlsafe
session id may hold "_3A", which the change view would otherwise read back as ":"."""
from django.contrib import admin
from django.contrib.admin.utils import unquote

from mcp_transport.admin.jobs import McpJobAdmin
from mcp_transport.models import McpJob


def test_a_jobs_session_link_survives_the_admins_unquoting():
    session_id = "Ab_3Acd_5Fef-gh_x"
    html = McpJobAdmin(McpJob, admin.site).session_link(McpJob(session_id=session_id))
    path = html.split('href="')[1].split('"')[0]
    assert unquote(path.split("/mcpsession/")[1].split("/")[0]) == session_id
