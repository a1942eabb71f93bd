"""The jobs list's progress bars: a share when the job said its total, indeterminate when not."""
from mcp_transport.admin.jobs import progress_bar_html, progress_state
from mcp_transport.models import McpJob

Status = McpJob.Status


def job(status, progress=None, total=None):
    return McpJob(id=f"job-{status}", tool="t", status=status, progress=progress, total=total, session_id="s",
                  stream_key="k", arguments={})


def test_a_known_total_gives_a_share_and_a_fraction():
    state = progress_state(job(Status.WORKING, 3, 12))
    assert state["percent"] == 25 and not state["indeterminate"] and state["text"] == "3/12"


def test_a_running_job_without_a_total_is_indeterminate_not_full():
    state = progress_state(job(Status.WORKING, 7))
    assert state["percent"] is None and state["indeterminate"] and state["text"] == "7 (no total)"
    html = progress_bar_html(job(Status.WORKING, 7))
    assert "mcp-indeterminate" in html and "aria-valuenow" not in html
    assert progress_state(job(Status.INPUT_REQUIRED))["text"] == "working, no total"


def test_ended_and_queued_jobs_say_what_they_are():
    done = progress_state(job(Status.COMPLETED))
    assert done["percent"] == 100 and not done["indeterminate"] and done["text"] == "done"
    assert progress_state(job(Status.COMPLETED, 40))["text"] == "done (40)"
    assert progress_state(job(Status.QUEUED))["text"] == "queued"
    failed = progress_state(job(Status.FAILED, 2))
    assert failed["percent"] is None and not failed["indeterminate"] and failed["text"] == "2"
    assert 'aria-valuenow="100"' in progress_bar_html(job(Status.COMPLETED))
