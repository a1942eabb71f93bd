"""Disconnect = cancel for plain 2026-07-28 calls of background tools, at every step of the call
(eras/modern_2026/jobs.py), and a cancel that races a worker taking the job (running/jobs/settling.py).

The steps are held open here with events standing in for the database, the broker and the
stream, so that the client's leaving lands exactly in the window under test; the same flow on
real daphne, Redis and a Celery worker is in tests/integration/test_modern_tasks.py and
test_job_cancel.py. Before: a cancel arriving while the job was being created left it queued and
running with no one to follow or cancel it; a second cancel of the call's task (or a database
error) during the cleanup lost the cancel; a cancel that read the job queued just before a worker
started it only revoked the Celery task, and the tool ran on."""
import asyncio
from types import SimpleNamespace

import pytest
from django.db import OperationalError

from mcp_transport.auth.callers import Caller
from mcp_transport.eras.modern_2026 import jobs as modern_jobs
from mcp_transport.models import McpJob
from mcp_transport.running import jobs
from mcp_transport.running.jobs import settling  # where the code under test reads them

Status = McpJob.Status


@pytest.fixture
def cancels(monkeypatch):
    """The job ids jobs.acancel was called with, and an event set at each call."""
    called, rang = [], asyncio.Event()

    async def acancel(job_id, reason="", stop=None):
        called.append(job_id)
        rang.set()
        return True

    monkeypatch.setattr(jobs, "acancel", acancel)
    monkeypatch.setattr(jobs, "load", _load_active)
    return called, rang


async def _load_active(job_id):
    await asyncio.sleep(0.01)  # a database read takes a while
    return McpJob(id=job_id, status=Status.WORKING)


def _call():
    session = SimpleNamespace(user_id=None, principal="", client_capabilities={})
    return SimpleNamespace(session=session, quota=None, job_id=None, principal=None, address="10.0.0.1", owner=None,
                           caller=Caller.of(None, "10.0.0.1"))


def _spec():
    return SimpleNamespace(name="tick_job")


async def _notify(method, params):
    pass


async def _start(monkeypatch, submitted: asyncio.Event, following: asyncio.Event, release_submit=None):
    """Start a call whose job creation waits on ``release_submit`` (if given) and whose stream
    never ends; returns its task once it reached the step under test."""
    async def submit(spec, arguments, **_fields):
        submitted.set()
        if release_submit is not None:
            await release_submit.wait()
        return McpJob(id="j" * 32, status=Status.QUEUED)

    async def follow(job, position, notify):
        following.set()
        await asyncio.get_running_loop().create_future()  # the job runs on

    monkeypatch.setattr(jobs, "submit", submit)
    monkeypatch.setattr(modern_jobs, "follow", follow)
    task = asyncio.create_task(modern_jobs.call(_spec(), {"name": "tick_job", "arguments": {}}, _call(), 1, _notify))
    return task


async def _cancelled(task):
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_client_leaving_while_its_job_is_created_cancels_the_job_once_it_exists(monkeypatch, cancels):
    called, rang = cancels
    submitted, following, release = asyncio.Event(), asyncio.Event(), asyncio.Event()
    task = await _start(monkeypatch, submitted, following, release)
    await submitted.wait()
    task.cancel()  # the disconnect: the job is being created (row written, task being queued)
    await _cancelled(task)
    assert called == []  # not before it exists: a cancel now would find no job
    release.set()
    await asyncio.wait_for(rang.wait(), 5)
    assert called == ["j" * 32] and not following.is_set()


async def test_a_second_cancel_of_the_call_does_not_lose_the_cancel_of_its_job(monkeypatch, cancels):
    called, rang = cancels
    submitted, following = asyncio.Event(), asyncio.Event()
    task = await _start(monkeypatch, submitted, following)
    await following.wait()
    task.cancel()
    await asyncio.sleep(0)  # the cleanup has begun
    task.cancel()  # and the task is cancelled again (its consumer failing, the loop closing)
    await _cancelled(task)
    await asyncio.wait_for(rang.wait(), 5)
    assert called == ["j" * 32]


async def test_a_cancel_that_meets_a_busy_database_is_tried_again(monkeypatch, cancels):
    called, rang = cancels
    failures = [OperationalError("database is locked")]

    async def acancel(job_id, reason="", stop=None):
        if failures:
            raise failures.pop()
        called.append(job_id)
        rang.set()
        return True

    monkeypatch.setattr(jobs, "acancel", acancel)
    submitted, following = asyncio.Event(), asyncio.Event()
    task = await _start(monkeypatch, submitted, following)
    await following.wait()
    task.cancel()
    await _cancelled(task)
    await asyncio.wait_for(rang.wait(), 5)
    assert called == ["j" * 32] and failures == []


async def test_a_call_that_ended_costs_no_cancel_and_no_read(monkeypatch, cancels):
    called, _rang = cancels
    loads = []

    async def load(job_id):
        loads.append(job_id)
        return await _load_active(job_id)

    monkeypatch.setattr(jobs, "load", load)

    async def submit(spec, arguments, **_fields):
        return McpJob(id="j" * 32, status=Status.QUEUED)

    async def follow(job, position, notify):
        return {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}

    monkeypatch.setattr(jobs, "submit", submit)
    monkeypatch.setattr(modern_jobs, "follow", follow)
    outcome = await modern_jobs.call(_spec(), {"name": "tick_job", "arguments": {}}, _call(), 1, _notify)
    await asyncio.sleep(0.05)
    assert outcome["result"] == {"content": []} and called == [] and loads == []


@pytest.mark.parametrize("taken", [True, False])
async def test_a_cancel_racing_a_worker_that_takes_the_job_stops_the_worker(monkeypatch, taken):
    """acancel reads the job queued; a worker starts it before the cancel is written (``taken``)."""
    row = {"status": Status.QUEUED}
    done = []

    async def load(job_id):
        job = McpJob(id=job_id, session_id="s", stream_key="k", status=row["status"])
        if taken and row["status"] == Status.QUEUED:
            row["status"] = Status.WORKING  # the worker's transition lands right after this read
        return job

    async def finish(job, status, result=None, error="", allowed=McpJob.ACTIVE, **_fields):
        if row["status"] not in allowed:
            return False
        row["status"] = job.status = status
        return True

    async def publish(kind, session_id, **fields):
        done.append(kind)

    async def revoke(job):
        done.append("revoke")

    async def stop_running(job):
        done.append("stop")

    monkeypatch.setattr(settling, "load", load)
    monkeypatch.setattr(settling, "finish", finish)
    monkeypatch.setattr(settling.control, "publish", publish)
    monkeypatch.setattr(settling, "_revoke", revoke)
    monkeypatch.setattr(settling, "_stop_running", stop_running)
    assert await jobs.acancel("j" * 32) is True
    assert row["status"] == Status.CANCELLED
    assert done == (["cancel", "stop"] if taken else ["cancel", "revoke"])
