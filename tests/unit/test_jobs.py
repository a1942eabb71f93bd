"""Background tools, the pure parts: registration options, task support, the MCP Task view,
task ttl, and the task-augmentation rules of tools/call. The flow itself (a real Celery worker)
is in tests/integration/test_jobs.py, test_job_faults.py and test_tasks.py."""
import threading
from datetime import datetime, timezone

import pytest
from celery import shared_task

from mcp_transport.methods import dispatch, listing, method_table, resources_prompts, tool_calls
from mcp_transport.running import jobs
from mcp_transport.state import quotas
from mcp_transport.running import routes
from mcp_transport.running.routes import Route
from mcp_transport.running.jobs import outcome, settling, submitting  # where the code under test reads them
from mcp_transport.running.jobs import rows as job_rows
from mcp_transport.eras.legacy_2025 import tasks
from mcp_transport.models import McpJob
from mcp_transport.protocol.errors import InvalidParams, MethodNotFound
from mcp_transport.protocol.jsonrpc import Request
from mcp_transport.methods.registry import Registry, registry
from mcp_transport.state.sessions import SessionRecord


@pytest.fixture
def reg(monkeypatch):
    fresh = Registry()
    for module in (method_table, listing, tool_calls, resources_prompts, routes):  # where the methods read it
        monkeypatch.setattr(module, "registry", fresh)
    return fresh


def _job(**fields):
    moment = datetime(2026, 11, 25, 10, 30, tzinfo=timezone.utc)
    defaults = {"id": "t" * 32, "session_id": "s" * 32, "stream_key": "k", "tool": "slow_job", "status": "working",
                "created_at": moment, "updated_at": moment, "ttl_ms": 60000}
    return McpJob(**{**defaults, **fields})


# --- registration ---------------------------------------------------------------------------

def test_background_tool_lists_optional_task_support_and_keeps_its_celery_options(reg):
    @reg.tool(background={"queue": "slow", "soft_time_limit": 5, "time_limit": 9})
    def crunch(n: int) -> int:
        return n

    spec = reg.tools["crunch"]
    assert spec.background and spec.may_send  # answered over SSE: a worker sends what it reports
    assert spec.describe()["execution"] == {"taskSupport": "optional"}
    assert submitting.celery_options(spec) == {"queue": "slow", "soft_time_limit": 5, "time_limit": 9}


@pytest.mark.parametrize("options, limits", [
    ({}, (3600, 3660)),                                         # the defaults (JOB_SOFT_TIME_LIMIT, JOB_TIME_LIMIT)
    ({"soft_time_limit": 5}, (5, 3660)),
    ({"soft_time_limit": 7200}, (7200, 7260)),                  # past the default hard limit: one after it
    ({"time_limit": 60}, (None, 60)),                           # a soft limit past the hard one never fires
    ({"time_limit": 7200}, (3600, 7200)),
])
def test_background_tools_get_the_default_time_limits_unless_they_set_their_own(reg, options, limits):
    """Issue 20 #2: a background tool without limits of its own had none (asleep for an hour,
    cancelled or not, it held its Celery slot)."""
    @reg.tool(background=options or True)
    def crunch(n: int) -> int:
        return n

    spec = reg.tools["crunch"]
    assert submitting.time_limits(spec) == limits
    assert submitting.celery_options(spec) == {key: value for key, value in zip(("soft_time_limit", "time_limit"), limits)
                                         if value is not None}


def test_inline_tools_have_no_execution_entry(reg):
    @reg.tool
    def quick() -> str:
        return "x"

    assert "execution" not in reg.tools["quick"].describe()


@pytest.mark.parametrize("options", [{"background": {"retry": 1}}, {"task_support": "required"},
                                     {"background": True, "task_support": "forbidden"}])
def test_bad_background_options_fail_at_registration(reg, options):
    with pytest.raises(ValueError):
        @reg.tool(**options)
        def tool(n: int) -> int:
            return n


def test_idempotent_tools_are_retried_up_to_max_retries_plus_one_runs(reg):
    @reg.tool(background={"max_retries": 2}, annotations={"idempotentHint": True})
    def safe() -> None:
        pass

    @reg.tool(background=True)
    def unsafe() -> None:
        pass

    assert reg.tools["safe"].idempotent and submitting.max_attempts(reg.tools["safe"]) == 3
    assert not reg.tools["unsafe"].idempotent and submitting.max_attempts(reg.tools["unsafe"]) == 4


@shared_task(name="tests.unit.resize", soft_time_limit=20, time_limit=30, max_retries=1)
def resize(path: str, width: int = 100) -> str:
    """Resize an image.

    Args:
        path: Where the image is.
        width: The new width in pixels.
    """
    return f"{path}@{width}"


def test_an_existing_celery_task_becomes_a_tool_with_its_signature_and_options(reg):
    assert reg.task_tool(resize) is resize
    spec = reg.tools["resize"]
    schema = spec.describe()["inputSchema"]
    assert schema["required"] == ["path"]
    assert schema["properties"]["width"]["description"] == "The new width in pixels."
    assert spec.description == "Resize an image."
    assert spec.background and spec.celery_task is resize
    assert spec.job_options == {"soft_time_limit": 20, "time_limit": 30, "max_retries": 1}
    assert resize("a.png", width=3) == "a.png@3"  # still an ordinary Celery task


# --- the MCP Task of a job ------------------------------------------------------------------

def test_task_view_has_the_spec_fields_and_a_queued_job_is_working():
    view = outcome.task_view(_job(status="queued"))
    assert view["taskId"] == "t" * 32 and view["status"] == "working"
    assert view["createdAt"] == "2026-11-25T10:30:00Z" and view["lastUpdatedAt"] == "2026-11-25T10:30:00Z"
    assert view["ttl"] == 60000 and view["pollInterval"] == 1000
    assert view["statusMessage"] == "Queued: waiting for a worker."


def test_task_view_of_a_failed_job_says_why():
    view = outcome.task_view(_job(status="failed", error="Tool x failed: KeyError."))
    assert view["status"] == "failed" and view["statusMessage"] == "Tool x failed: KeyError."


def test_error_results_make_failed_jobs():
    error = {"content": [{"type": "text", "text": "boom"}], "isError": True}
    assert outcome.outcome_status(error) == "failed" and outcome.error_text(error) == "boom"
    assert outcome.outcome_status({"content": []}) == "completed" and outcome.error_text({"content": []}) == ""


@pytest.mark.parametrize("task, granted", [({}, 3600 * 1000), ({"ttl": 5000}, 5000), ({"ttl": -1}, 3600 * 1000),
                                           ({"ttl": 10 ** 12}, 24 * 3600 * 1000), ({"ttl": True}, 3600 * 1000)])
def test_task_ttl_is_the_requested_one_capped(task, granted):
    assert tasks.granted_ttl(task) == granted


def test_job_ids_are_long_and_random():
    ids = {job_rows.new_job_id() for _ in range(100)}
    assert len(ids) == 100 and all(len(i) >= 32 for i in ids)


# --- task augmentation of tools/call --------------------------------------------------------

@pytest.fixture
def call():
    class Channel:
        request_id, cancelled = 1, False

    return dispatch.Call(session=SessionRecord(id="x" * 32, protocol_version="2025-11-25"), channel=Channel())


def _tools_call(name, **params):
    return Request(id=1, method="tools/call", params={"name": name, "arguments": {}, **params})


@pytest.mark.asyncio
async def test_a_task_of_a_tool_without_task_support_is_method_not_found(reg, call):
    @reg.tool(background=True)
    def crunch() -> None:
        pass

    @reg.tool
    def quick() -> str:
        return "x"

    with pytest.raises(MethodNotFound):
        await dispatch.dispatch(_tools_call("quick", task={}), call)


@pytest.mark.asyncio
async def test_a_plain_call_of_a_task_required_tool_is_method_not_found(reg, call):
    @reg.tool(background=True, task_support="required")
    def report() -> str:
        return "x"

    with pytest.raises(MethodNotFound):
        await dispatch.dispatch(_tools_call("report"), call)
    assert not runs_in_background(_tools_call("report"))


@pytest.mark.asyncio
async def test_without_background_tools_the_task_field_is_ignored(reg, call):
    @reg.tool
    def quick() -> str:
        return "x"

    assert "tasks" not in dispatch.capabilities()
    result = await dispatch.dispatch(_tools_call("quick", task={"ttl": 5}), call)
    assert result["structuredContent"] == {"result": "x"}


@pytest.mark.asyncio
async def test_a_task_with_bad_arguments_is_invalid_params(reg, call):
    @reg.tool(background=True)
    def crunch(n: int) -> int:
        return n

    with pytest.raises(InvalidParams):
        await dispatch.dispatch(_tools_call("crunch", task={}), call)


def test_only_plain_calls_with_valid_arguments_run_in_background(reg):
    @reg.tool(background=True)
    def crunch(n: int) -> int:
        return n

    assert runs_in_background(Request(id=1, method="tools/call", params={"name": "crunch", "arguments": {"n": 1}}))
    assert not runs_in_background(_tools_call("crunch"))  # missing n: an isError result inline
    assert not runs_in_background(_tools_call("crunch", task={}))
    assert not runs_in_background(Request(id=1, method="tools/call", params={"name": ["x"]}))


def runs_in_background(request) -> bool:
    """A worker runs the call (its route, planned for a transport that streams it)."""
    route = Route.of(request, dispatch.METHODS)
    route.plan(None, lambda may_send, blocks: True)
    return route.background


# --- the task a taskId names (both eras) ----------------------------------------------------

@pytest.fixture
def stored(monkeypatch):
    """jobs.load over a dict of rows; the ids it was asked for."""
    rows, asked = {}, []

    async def load(job_id, by=None):
        asked.append(job_id)
        return rows.get(job_id)

    monkeypatch.setattr(job_rows, "load", load)
    return rows, asked


async def test_load_task_finds_only_a_task_of_its_owner_its_session_and_its_era(stored):
    rows, asked = stored
    legacy = _job(id=job_rows.new_job_id(), is_task=True, principal="alice", session_id="s1")
    modern = _job(id=job_rows.new_job_id(), is_task=True, principal="alice", session_id="x",
                  context=job_rows.modern_context({}))
    plain = _job(id=job_rows.new_job_id(), is_task=False, principal="alice", session_id="s1")
    rows.update({job.id: job for job in (legacy, modern, plain)})
    assert await jobs.load_task(legacy.id, "alice", session_id="s1") is legacy
    assert await jobs.load_task(legacy.id, "bob", session_id="s1") is None
    assert await jobs.load_task(legacy.id, "alice", session_id="s2") is None
    assert await jobs.load_task(legacy.id, "alice", modern=True) is None
    assert await jobs.load_task(modern.id, "alice", modern=True) is modern
    assert await jobs.load_task(modern.id, "alice", session_id="s1") is None
    assert await jobs.load_task(plain.id, "alice", session_id="s1") is None
    asked.clear()
    assert await jobs.load_task("no\x00such task", "alice", modern=True) is None
    assert asked == []  # not a job id: not looked up


async def test_a_clients_read_of_its_task_runs_in_its_callers_share_of_the_handler_threads(monkeypatch):
    """Issue 38 #8: tasks/get read on Channels' one thread-sensitive thread, where every job's
    row is written: one user's polls queued another's task creation behind them. The
    integration test (PostgreSQL) is tests/integration/test_poll_shares.py."""
    from mcp_transport.methods import threads

    lane = threads.lanes().by_name[threads.HANDLERS]
    seen = []

    def row(job_id):
        seen.append((threading.current_thread().name, dict(lane.by_caller)))
        return job_id

    monkeypatch.setattr(job_rows, "_row", row)
    call = method_table.Call(session=SessionRecord(id="", protocol_version="2026-07-28"), address="10.0.0.9", owner="o")
    assert await jobs.load("j" * 32, by=call) == "j" * 32
    assert seen == [(seen[0][0], {call.caller.key: 1})] and seen[0][0].startswith("mcp-handlers")
    assert call.caller.key == quotas.caller_key("", "10.0.0.9")


def test_a_task_expires_with_its_ttl_and_one_without_ttl_never():
    old = datetime(2020, 1, 1, tzinfo=timezone.utc)
    assert job_rows.task_expired(_job(created_at=old, ttl_ms=60000))
    assert not job_rows.task_expired(_job(created_at=old, ttl_ms=None))
    assert not job_rows.task_expired(_job(created_at=datetime.now(timezone.utc), ttl_ms=60000))


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("fields, served", [
    ({"status": "queued"}, False),                                                   # nobody took it
    ({"status": "working", "started_at": "long ago"}, True),                         # running now
    ({"status": "completed", "started_at": "long ago", "finished_at": "long ago"}, False),  # served, once
    ({"status": "completed", "started_at": "long ago", "finished_at": "just now"}, True),
    ({"status": "failed", "finished_at": "just now"}, False),                        # expired unclaimed
])
async def test_the_queue_counts_as_served_until_a_window_after_its_last_job_ended(fields, served):
    """Between a long job's end and the worker taking the next one nothing runs, and the long job
    started long ago: its end must still count, or the job behind it is failed as unclaimed."""
    from asgiref.sync import sync_to_async
    from datetime import timedelta
    from django.utils import timezone as django_time

    moments = {"long ago": django_time.now() - timedelta(seconds=600), "just now": django_time.now()}
    row = {name: moments.get(value, value) for name, value in fields.items()}
    await sync_to_async(McpJob.objects.create)(id=job_rows.new_job_id(), session_id="s" * 32, stream_key="k",
                                              tool="slow_job", **row)
    queue = submitting.queue_of(registry.tools["slow_job"])
    assert await settling._queue_is_served(queue, 60) is served
