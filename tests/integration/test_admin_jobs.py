"""The jobs admin against a live daphne server and a real Celery worker: the list with live
progress, the progress JSON view the bars poll, cancel (the path of notifications/cancelled),
a job's page, and the dashboard's job signals."""
import json
import re
import time

import pytest
from django.contrib.admin.utils import quote

from mcp_transport.testing import HttpClient

from .waiting import eventually, settled

from .test_admin import FAST, Admin, _cells, _row, session_url

JOBS = "/admin/mcp_transport/mcpjob/"
#: Seconds to wait for something a loaded machine may delay (a worker taking a job, a row
#: written): a deadline for a condition, never a duration the test sleeps.
DEADLINE = 120.0


@pytest.fixture(scope="module")
def server(start_server):
    return start_server(MCP_TRANSPORT_JSON=FAST)


@pytest.fixture(scope="module")
def admin(server, admin_login):
    return Admin(server, admin_login)


@pytest.fixture(autouse=True)
def _worker(celery_worker):
    return celery_worker


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


def test_jobs_list_shows_running_jobs_with_live_progress(server, admin):
    client, stream = _started(server, steps=1000, interval_ms=100)  # runs until cancelled below
    job_id = _job_id(admin, client.session_id)
    html = admin.page(JOBS, q=client.session_id[:12])
    cells = _cells(_row(html, job_id))
    assert cells[2] == "slow_job" and cells[3] == "Working"
    assert 'data-active="1"' in html and "mcp_transport/jobs.js" in html
    session_page = admin.page(f"{session_url(client.session_id)}/change/")
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


def test_the_jobs_list_html_carries_no_full_session_id(server, admin):
    """The jobs list links each job to its session by reference: its HTML holds at most the 8
    characters of the session id it shows, and the link opens the session page."""
    client, stream = _started(server, steps=1000, interval_ms=100)
    job_id = _job_id(admin, client.session_id)
    for html in (admin.page(JOBS), admin.page(JOBS, q=client.session_id[:8])):
        assert client.session_id[:9] not in html and quote(client.session_id[:9]) not in html
        link = re.search(r'href="(/admin/mcp_transport/mcpsession/[^"?]+/change/)[?"]', _row(html, job_id)).group(1)
        assert client.session_id in admin.page(link)
    _cancel(admin, job_id)
    stream.close()


def test_cancel_action_stops_the_worker_and_the_stream_ends_without_a_result(server, admin):
    key = f"ticks-admin-{time.monotonic_ns()}"
    client, stream = _started(server, "tick_job", key=key, steps=2000, interval_ms=50)
    job_id = _job_id(admin, client.session_id)
    html = admin.post(JOBS, {"action": "cancel_jobs", "index": 0, "select_across": 0, "_selected_action": [job_id]})
    assert "Cancelled 1 job(s)" in html, (_messages(html), _progress(admin, job_id), server.log()[-3000:])
    rest = [json.loads(event.data) for event in stream.events(timeout=60) if event.data]
    assert stream.closed_by_server and all("method" in message for message in rest)  # no response after a cancel
    # The worker sees the cancel at its next tick; left running it would count to 2,000 (100 s).
    assert settled(key) < 2000
    state = _progress(admin, job_id)
    assert state["status"] == "cancelled" and not state["active"]
    page = admin.page(f"{JOBS}{quote(job_id)}/change/")
    assert "Cancelled by an administrator." in page


def test_finished_job_page_and_the_dashboard(server, admin):
    client = HttpClient(server.url)
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
