"""Admin links to sessions quote the reference as Django's admin quotes primary keys: the id's
prefix in it may hold "_3A", which the change view would otherwise read back as ":"."""
from django.contrib import admin
from django.contrib.admin.utils import unquote

from mcp_transport.admin import refs
from mcp_transport.admin.jobs import McpJobAdmin
from mcp_transport.models import McpJob


def test_a_jobs_session_link_survives_the_admins_unquoting():
    session_id = "Ab_3Acd_5Fef-gh_x"
    html = McpJobAdmin(McpJob, admin.site).session_link(McpJob(session_id=session_id))
    path = html.split('href="')[1].split('"')[0]
    reference = unquote(path.split("/mcpsession/")[1].split("/")[0])
    assert refs.names(reference, session_id) and session_id not in path
