"""The calls log in the admin, against a live daphne server and a real Celery worker: calls of
both eras (inline, streamed, background, task-augmented, refused) are listed with their era,
method, target, status, timing and sizes, found by request id and filtered by era; each has a
page; 2026-07-28 jobs link to their call, never to a session; the list names sessions and jobs
by reference only."""
import re
import time

import pytest

from mcp_transport.testing import HttpClient, ModernClient

from .test_admin import _cells
from .test_admin_jobs import DEADLINE, JOBS, TASKS, _wait_for, assert_no_full_id, job_row, task_status
from .waiting import eventually

CALLS = "/admin/mcp_transport/mcpcall/"


#: Every test here needs jobs to run.
pytestmark = pytest.mark.usefixtures("celery_worker")


def listed(admin, request_id) -> list:
    """The cells of the one row of the call with this request id, once its batch is written."""
    def row():
        html = admin.page(CALLS, q=request_id)
        rows = re.findall(r"<tr>(?:(?!</tr>).)*?field-started(?:(?!</tr>).)*</tr>", html, re.S)
        assert len(rows) == 1, f"{len(rows)} rows for {request_id}"
        return rows[0]
    return eventually(row, deadline=DEADLINE)


def call_id(row) -> str:
    return re.search(r'href="/admin/mcp_transport/mcpcall/(\d+)/change/', row).group(1)


@pytest.fixture(scope="module")
def traffic(admin_server):
    """One call of each kind, with request ids of their own."""
    tag = f"calls-{time.monotonic_ns()}"
    legacy = HttpClient(admin_server.url)
    legacy.initialize()
    echo = legacy.message("tools/call", {"name": "echo", "arguments": {"text": "hi"}}, request_id=f"{tag}-legacy")
    list(legacy.stream("POST", echo).events(timeout=DEADLINE))
    job = legacy.message("tools/call", {"name": "slow_job", "arguments": {"steps": 2, "interval_ms": 10}},
                         request_id=f"{tag}-job")
    list(legacy.stream("POST", job).events(timeout=DEADLINE))
    modern = ModernClient(admin_server.url, TASKS)
    reply = modern.post("tools/call", {"name": "echo", "arguments": {"text": "hi"}}, request_id=f"{tag}-modern")
    assert reply.status == 200 and "result" in reply.json, reply.body
    reply = modern.post("tools/call", {"name": "slow_job", "arguments": {"steps": 2, "interval_ms": 10}},
                        request_id=f"{tag}-task")
    task_id = reply.json["result"]["taskId"]
    _wait_for(lambda: task_status(modern, task_id) == "completed", "the task completed")
    refused = modern.post("prompts/get", {"name": "no-such-prompt"}, request_id=f"{tag}-refused")
    assert "error" in refused.json, refused.body
    return {"tag": tag, "session_id": legacy.session_id, "task_id": task_id}


def test_a_2025_call_is_listed_with_its_session_by_reference(admin, traffic):
    row = listed(admin, f"{traffic['tag']}-legacy")
    cells = _cells(row)
    assert cells[1:5] == ["2025-11-25", "tools/call", "echo", "ok"], cells
    assert re.match(r"[\d.]+ ms", cells[5]) and re.match(r"[\d,]+ / [\d,]+", cells[6]), cells
    assert cells[8] == "mcp-transport-tests", cells  # the client's clientInfo name
    assert f"<code>{traffic['session_id'][:8]}…</code>" in row
    assert_no_full_id(admin.page(CALLS, q=f"{traffic['tag']}-legacy"), traffic["session_id"])


def test_a_2025_background_call_links_to_its_job(admin, traffic):
    row = listed(admin, f"{traffic['tag']}-job")
    assert _cells(row)[2:5] == ["tools/call", "slow_job", "handed to a job"], _cells(row)
    job_page = re.search(r'href="(/admin/mcp_transport/mcpjob/[^"]+/change/)"', row).group(1)
    assert "slow_job" in admin.page(job_page)


def test_a_2026_call_has_no_session_and_its_task_links_both_ways(admin, traffic):
    row = listed(admin, f"{traffic['tag']}-modern")
    assert _cells(row)[1:5] == ["2026-07-28", "tools/call", "echo", "ok"], _cells(row)
    assert "mcpsession" not in row
    task_row = listed(admin, f"{traffic['tag']}-task")
    assert _cells(task_row)[2:5] == ["tools/call", "slow_job", "handed to a job"], _cells(task_row)
    assert_no_full_id(admin.page(CALLS, q=f"{traffic['tag']}-task"), traffic["task_id"])
    # The jobs list links the task to this call (it linked to a session page that did not exist).
    jobs_row = job_row(admin.page(JOBS, q="slow_job"), traffic["task_id"])
    assert f'href="/admin/mcp_transport/mcpcall/{call_id(task_row)}/change/"' in jobs_row, jobs_row
    page = admin.page(f"{CALLS}{call_id(task_row)}/change/")
    assert "slow_job" in page and "handed to a job" in page and f"{traffic['tag']}-task" in page


def test_a_refused_call_shows_its_error_code_and_the_era_filter_separates_the_eras(admin, traffic):
    row = listed(admin, f"{traffic['tag']}-refused")
    assert _cells(row)[2:5] == ["prompts/get", "no-such-prompt", "JSON-RPC error -32602"], _cells(row)
    for request_id, era in ((f"{traffic['tag']}-modern", "2026-07-28"), (f"{traffic['tag']}-legacy", "2025-11-25")):
        other = "2025-11-25" if era == "2026-07-28" else "2026-07-28"
        assert admin.page(CALLS, q=request_id, era=era).count('class="field-started"') == 1
        assert admin.page(CALLS, q=request_id, era=other).count('class="field-started"') == 0
