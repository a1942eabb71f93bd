"""settling.watch: a job whose call record missed its beats is lost, unless its worker took it just
now (its first beat follows the row's change to working: a look between the two saw the stale
beat of its time in the queue)."""
import asyncio
from datetime import timedelta

import pytest
from django.utils import timezone

from mcp_transport.models import McpJob
from mcp_transport.running.jobs import settling  # where watch reads them
from mcp_transport.state import control


@pytest.fixture
def lost(monkeypatch):
    """The jobs worker_lost was called for; every call record looks dead."""
    called = []

    async def worker_lost(job, **flags):
        called.append(job.id)

    monkeypatch.setattr(settling, "worker_lost", worker_lost)
    monkeypatch.setattr(control, "looks_dead", lambda call: True)
    return called


def watched(monkeypatch, started_ago):
    job = McpJob(id="j1", tool="slow_job", status=McpJob.Status.WORKING,
                 started_at=timezone.now() - timedelta(seconds=started_ago))

    async def load(job_id, by=None):
        return job

    monkeypatch.setattr(settling, "load", load)
    return asyncio.run(settling.watch("s1", "k1", {"job": "j1", "beat": "0"}))


def test_a_job_its_worker_took_just_now_is_not_lost(monkeypatch, lost):
    """bench/chaos.py: a job queued while the worker restarted failed "The worker running tool
    slow_job was lost" the moment the new worker began it (the job then ran to its end)."""
    assert watched(monkeypatch, started_ago=0.2) is False
    assert lost == []


def test_a_job_whose_worker_stopped_beating_is_lost(monkeypatch, lost):
    assert watched(monkeypatch, started_ago=control.orphan_after_ms() / 1000 + 5) is True
    assert lost == ["j1"]
