"""Admin links to sessions and jobs quote the reference as Django's admin quotes primary keys:
the id's prefix in it may hold "_3A", which the change view would otherwise read back as ":".
Each kind of reference has its own salt."""
from django.contrib import admin
from django.contrib.admin.utils import unquote

from mcp_transport.admin import refs
from mcp_transport.admin.jobs import McpJobAdmin, job_url
from mcp_transport.models import McpJob


def test_a_jobs_session_link_survives_the_admins_unquoting():
    session_id = "Ab_3Acd_5Fef-gh_x"
    html = McpJobAdmin(McpJob, admin.site).session_link(McpJob(session_id=session_id))
    path = html.split('href="')[1].split('"')[0]
    reference = unquote(path.split("/mcpsession/")[1].split("/")[0])
    assert refs.SESSIONS.names(reference, session_id) and session_id not in path


def test_a_jobs_link_survives_the_admins_unquoting():
    job_id = "Ab_3Acd_5Fef-gh_xYZ0123456789abcd"
    path = job_url(job_id)
    reference = unquote(path.split("/mcpjob/")[1].split("/")[0])
    assert refs.JOBS.names(reference, job_id) and job_id not in path


def test_a_reference_names_objects_of_its_own_kind_only():
    """A job id is a task's handle: a session's reference of the same string (another salt)
    must not stand for the job, nor a job's for a session."""
    object_id = "Ab_3Acd_5Fef-gh_xYZ0123456789abcd"
    job, session = refs.JOBS.ref(object_id), refs.SESSIONS.ref(object_id)
    assert job != session and job.startswith(object_id[:refs.PREFIX] + refs.SEPARATOR)
    assert refs.JOBS.names(job, object_id) and not refs.JOBS.names(session, object_id)
    assert refs.SESSIONS.names(session, object_id) and not refs.SESSIONS.names(job, object_id)


def test_a_reference_whose_prefix_is_short_names_nothing_without_a_query():
    """A forged reference with a one-character prefix must not make the progress view or an action
    read a 64th of every job (this test has no database: a query would fail it)."""
    forged = [f"{letter}.{'0' * 24}" for letter in "abcdefghij"]
    assert refs.JOBS.select(McpJob.objects.all(), forged) == {}
    assert refs.JOBS.find(McpJob.objects.all(), "a.tag") is None


def test_a_session_pages_events_show_task_ids_cut():
    """A stored answer that created a task (sent on an SSE stream) carries its taskId: the
    session page showed it whole, and a job id is a task's only credential with auth off."""
    from mcp_transport.admin.sessions import _task_ids_cut

    message = {"jsonrpc": "2.0", "id": 2, "result": {"task": {"taskId": "a8OYfoWdZ3TkUZ-1EhgftsxKUjYiXI_A"}},
               "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "b" * 32}}, "list": [{"taskId": 7}]}
    shown = _task_ids_cut(message)
    assert shown["result"]["task"]["taskId"] == "a8OYfoWd…"
    assert shown["_meta"]["io.modelcontextprotocol/related-task"]["taskId"] == "bbbbbbbb…"
    assert shown["list"] == [{"taskId": 7}] and shown["id"] == 2
