"""The jobs admin against a live daphne server and a real Celery worker: the list with live
progress, the progress JSON view the bars poll, cancel (the path of notifications/cancelled),
a job's page, and the dashboard's job signals."""
import json
import re
import time

import pytest
from django.contrib.admin.utils import quote

from mcp_transport.testing import HttpClient, ModernClient

from .waiting import eventually, settled

from .test_admin import _cells, _row, session_url

JOBS = "/admin/mcp_transport/mcpjob/"
#: Seconds to wait for something a loaded machine may delay (a worker taking a job, a row
#: written): a deadline for a condition, never a duration the test sleeps.
DEADLINE = 120.0


#: Every test here needs jobs to run.
pytestmark = pytest.mark.usefixtures("celery_worker")


def _job_call(client, name, **arguments):
    return client.message("tools/call", {"name": name, "arguments": arguments, "_meta": {"progressToken": "p"}})


def _started(server, name="slow_job", **arguments):
    """A session whose background call is running in the worker; returns (client, stream)."""
    client = HttpClient(server.url)
    client.initialize()
    stream = client.stream("POST", _job_call(client, name, **arguments))
    stream.next_event(timeout=DEADLINE)  # priming
    stream.next_event(timeout=DEADLINE)  # the first progress: the worker runs it
    return client, stream


def _wait_for(condition, what):
    """condition()'s first truthy value, polled until DEADLINE."""
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what} within {DEADLINE} s")


def _session_page(admin, url) -> str:
    """A session's admin page, once its row is there: a session's row is written behind its
    first use (state/session_rows.py, a group commit), so it may lag the job's by a moment."""
    _wait_for(lambda: admin.send(url)[0] == 200, f"the session's row ({url})")
    return admin.page(url)


def _cancel(admin, job_id):
    html = admin.post(JOBS, {"action": "cancel_jobs", "index": 0, "select_across": 0, "_selected_action": [job_id]})
    assert "Cancelled 1 job(s)" in html, _messages(html)


def _job_id(admin, session_id) -> str:
    html = admin.page(JOBS, q=session_id[:12])
    return _row_id(html)


def _row_id(html) -> str:
    start = html.index('data-job="') + len('data-job="')
    return html[start:html.index('"', start)]


def _messages(html) -> list:
    return re.findall(r'<li class="[^"]*">([^<]*)</li>', html.split('class="messagelist"')[-1].split("</ul>")[0])


def _progress(admin, job_id) -> dict:
    return json.loads(admin.page(f"{JOBS}progress/", id=job_id))["jobs"][job_id]


def test_jobs_list_shows_running_jobs_with_live_progress(admin_server, admin):
    client, stream = _started(admin_server, steps=1000, interval_ms=100)  # runs until cancelled below
    job_id = _job_id(admin, client.session_id)
    html = admin.page(JOBS, q=client.session_id[:12])
    cells = _cells(_row(html, job_id))
    assert cells[2] == "slow_job" and cells[3] == "Working"
    assert 'data-active="1"' in html and "mcp_transport/jobs.js" in html
    session_page = _session_page(admin, f"{session_url(client.session_id)}/change/")
    assert "Background jobs" in session_page and f'data-job="{job_id}" data-active="1"' in session_page
    first = _progress(admin, job_id)

    def moved():  # the worker writes a running job's progress to its row about every half second
        state = _progress(admin, job_id)
        return state if (state["progress"] or 0) > (first["progress"] or 0) else None

    later = _wait_for(moved, "the job's progress moved")
    assert first["active"] and later["active"] and later["total"] == 1000 and later["text"].endswith("/1000")
    assert 0 < later["percent"] < 100
    _cancel(admin, job_id)  # frees the worker for the next tests
    stream.close()


def test_the_jobs_list_html_carries_no_full_session_id(admin_server, admin):
    """The jobs list links each job to its session by reference: its HTML holds at most the 8
    characters of the session id it shows, and the link opens the session page."""
    client, stream = _started(admin_server, steps=1000, interval_ms=100)
    job_id = _job_id(admin, client.session_id)
    for html in (admin.page(JOBS), admin.page(JOBS, q=client.session_id[:8])):
        assert client.session_id[:9] not in html and quote(client.session_id[:9]) not in html
        link = re.search(r'href="(/admin/mcp_transport/mcpsession/[^"?]+/change/)[?"]', _row(html, job_id)).group(1)
        assert client.session_id in _session_page(admin, link)
    _cancel(admin, job_id)
    stream.close()


TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


def running_task(server):
    """A 2026-07-28 task of a long tool (stopped by a cancel), and its client: its taskId is its
    job id, which alone reads, updates or cancels it where authorization is off."""
    client = ModernClient(server.url, TASKS)
    reply = client.post("tools/call", {"name": "slow_compute", "arguments": {"seconds": 600}})
    assert reply.status == 200 and "result" in reply.json, reply.body
    return client, reply.json["result"]["taskId"]


def task_status(client, task_id) -> str:
    return client.post("tasks/get", {"taskId": task_id}).json["result"]["status"]


def job_row(html, job_id) -> str:
    """The changelist row that shows ``job_id``'s first 8 characters."""
    match = re.search(r'<tr>(?:(?!</tr>).)*?<code>%s…</code>(?:(?!</tr>).)*</tr>' % re.escape(job_id[:8]), html, re.S)
    assert match, f"no row for {job_id[:8]}"
    return match.group(0)


def assert_no_full_id(html, job_id):
    """At most the 8 characters a list shows, raw or quoted as the admin quotes keys in URLs."""
    for form in (job_id[:9], quote(job_id[:9])):
        assert form not in html, html[html.index(form) - 300:html.index(form) + 100]


def test_the_jobs_list_names_jobs_by_reference_and_the_reference_opens_and_cancels_the_job(admin_server, admin):
    """Rows' text, links, action checkboxes, the bars' data, a search and a popup list hold no
    full taskId; the row's link opens the job's page (the full id there), the bars' progress
    JSON answers by reference, and the checkbox's value cancels the task."""
    client, task_id = running_task(admin_server)
    pages = [admin.page(JOBS), admin.page(JOBS, q=task_id[:8]), admin.page(JOBS, _popup=1)]
    for html in pages:
        assert_no_full_id(html, task_id)
    row = job_row(pages[1], task_id)
    reference = re.search(r'name="_selected_action" value="([^"]+)"', row).group(1)
    assert reference.startswith(f"{task_id[:8]}.") and f'data-job="{reference}"' in row
    progress = admin.page(f"{JOBS}progress/", id=reference)
    assert task_id[:9] not in progress and json.loads(progress)["jobs"][reference]["active"]
    link = re.search(r'href="(/admin/mcp_transport/mcpjob/[^"?]+/change/)[?"]', row).group(1)
    page = admin.page(link)
    assert task_id in page and "Cancel job" in page
    html = admin.post(JOBS, {"action": "cancel_jobs", "index": 0, "select_across": 0, "_selected_action": [reference]})
    assert "Cancelled 1 job(s)" in html, _messages(html)
    assert task_status(client, task_id) == "cancelled"


def test_a_session_pages_jobs_are_named_by_reference(admin_server, admin):
    """The session page shows its session's id, not its tasks' ids: a job's link and its bar
    name it by reference, and the link opens the job's page."""
    client = HttpClient(admin_server.url)
    client.initialize()
    arguments = {"steps": 1000, "interval_ms": 100}  # runs until cancelled below
    reply = client.call("tools/call", {"name": "slow_job", "arguments": arguments, "task": {}})
    task_id = reply["result"]["task"]["taskId"]
    # Its row is written behind its first request (the admin lists a session that did something).
    page = eventually(lambda: admin.page(f"{session_url(client.session_id)}/change/"))
    assert "Background jobs" in page and client.session_id in page
    assert_no_full_id(page, task_id)
    link = re.search(r'href="(/admin/mcp_transport/mcpjob/[^"?]+/change/)"><code>%s…' % re.escape(task_id[:8]),
                     page).group(1)
    assert task_id in admin.page(link)
    assert "Job cancelled." in admin.post(link.replace("/change/", "/cancel/"), {})
    assert client.call("tasks/get", {"taskId": task_id})["result"]["status"] == "cancelled"


def test_cancel_action_stops_the_worker_and_the_stream_ends_without_a_result(admin_server, admin):
    key = f"ticks-admin-{time.monotonic_ns()}"
    client, stream = _started(admin_server, "tick_job", key=key, steps=2000, interval_ms=50)
    job_id = _job_id(admin, client.session_id)
    html = admin.post(JOBS, {"action": "cancel_jobs", "index": 0, "select_across": 0, "_selected_action": [job_id]})
    assert "Cancelled 1 job(s)" in html, (_messages(html), _progress(admin, job_id), admin_server.log()[-3000:])
    rest = [json.loads(event.data) for event in stream.events(timeout=60) if event.data]
    assert stream.closed_by_server and all("method" in message for message in rest)  # no response after a cancel
    # The worker sees the cancel at its next tick; left running it would count to 2,000 (100 s).
    assert settled(key) < 2000
    state = _progress(admin, job_id)
    assert state["status"] == "cancelled" and not state["active"]
    page = admin.page(f"{JOBS}{quote(job_id)}/change/")
    assert "Cancelled by an administrator." in page


def test_finished_job_page_and_the_dashboard(admin_server, admin):
    client = HttpClient(admin_server.url)
    client.initialize()
    reply = client.call("tools/call", {"name": "slow_job", "arguments": {"steps": 3, "interval_ms": 10}})
    assert reply["result"]["structuredContent"] == {"result": "done 3"}
    job_id = _job_id(admin, client.session_id)
    state = _progress(admin, job_id)
    assert state["status"] == "completed" and state["percent"] == 100 and state["duration"].endswith(" s")
    page = admin.page(f"{JOBS}{quote(job_id)}/change/")
    assert "&quot;steps&quot;: 3" in page and "&quot;result&quot;: &quot;done 3&quot;" in page
    assert "Cancel job" not in page
    assert admin.post(f"{JOBS}{quote(job_id)}/cancel/", {}).count("The job had already ended") == 1

    def dashboard():  # once the worker's counters are flushed and sampled
        html = admin.page("/admin/mcp_transport/mcpsession/dashboard/")
        assert "<h3>Jobs finished per minute</h3>" in html and "<h3>Job latency (mean per bucket)</h3>" in html
        finished = html.split('<div class="label">Jobs finished</div><div class="value">')[1].split("<")[0]
        assert int(finished.replace(",", "")) >= 1
    eventually(dashboard)


def test_a_jobs_progress_reaches_its_row_without_a_progress_token(admin_server, admin):
    """The operators' view does not depend on the client asking for notifications: a call
    without ``_meta.progressToken`` gets no progress, and its job's row still has it."""
    client = HttpClient(admin_server.url)
    client.initialize()
    stream = client.stream("POST", client.message("tools/call", {"name": "slow_job",
                                                                 "arguments": {"steps": 4, "interval_ms": 10}}))
    messages = list(stream.messages(timeout=DEADLINE))
    assert [m.get("method") for m in messages if "method" in m] == []  # no token, no notifications
    assert messages[-1]["result"]["content"][0]["text"] == "done 4", messages
    state = _progress(admin, _job_id(admin, client.session_id))
    assert (state["progress"], state["total"], state["message"], state["text"]) == (4, 4, "step 4", "4/4")


def test_a_2026_job_shows_its_progress_and_links_to_no_session(admin_server, admin):
    """A 2026-07-28 task has no session: its row names none (it read "stateles…", a link to a
    session page that does not exist), and its progress reaches the row without a token."""
    client = ModernClient(admin_server.url, TASKS)
    reply = client.post("tools/call", {"name": "slow_job", "arguments": {"steps": 3, "interval_ms": 10}})
    task_id = reply.json["result"]["taskId"]
    _wait_for(lambda: task_status(client, task_id) == "completed", "the task completed")
    row = job_row(admin.page(JOBS, q="slow_job"), task_id)
    assert "mcpsession" not in row and "stateles" not in row, row
    reference = re.search(r'data-job="([^"]+)"', row).group(1)
    assert _progress(admin, reference)["text"] == "3/3"
