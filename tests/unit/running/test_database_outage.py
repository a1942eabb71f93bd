"""DATABASE_OUTAGE_TOLERANCE: how long a worker's writes of its job's start and end ride out an
unreachable database before the call gets an error result (issue 18: it was a constant, 60 s)."""
import asyncio
import time

import pytest
from django.conf import settings
from django.db import OperationalError
from django.test import override_settings

from mcp_transport import checks as mcp_checks
from mcp_transport.conf import get_config
from mcp_transport.models import McpJob
from mcp_transport.running.jobs import rows, settling  # where the code under test reads them


def tolerating(seconds):
    return override_settings(MCP_TRANSPORT={**settings.MCP_TRANSPORT, "DATABASE_OUTAGE_TOLERANCE": seconds})


def test_the_default_is_sixty_seconds():
    assert get_config()["DATABASE_OUTAGE_TOLERANCE"] == 60


async def test_a_write_retries_and_gives_up_once_the_tolerance_has_passed():
    attempts = []

    async def unreachable():
        attempts.append(time.monotonic())
        raise OperationalError("could not connect to server: Connection refused")

    with tolerating(0.5), pytest.raises(OperationalError):
        # With the tolerance ignored the write would go on for the default's 60 s.
        await asyncio.wait_for(rows.riding_out_database(unreachable), 20)
    assert len(attempts) >= 2  # retried (after 0.1 s, then 0.2 s) ...
    assert attempts[-1] - attempts[0] <= 0.5  # ... but never tried past the tolerance


async def test_a_write_that_succeeds_within_the_tolerance_returns_its_value():
    failures = [OperationalError("the database system is starting up")] * 2

    async def restarting():
        if failures:
            raise failures.pop()
        return "written"

    with tolerating(30):
        assert await asyncio.wait_for(rows.riding_out_database(restarting), 20) == "written"
    assert failures == []


async def test_the_error_result_names_the_tolerance_in_force(monkeypatch):
    ended = []

    async def finish(job, status, result=None, error="", **fields):
        ended.append((status, error))
        return True

    monkeypatch.setattr(settling, "finish", finish)
    job = McpJob(id="j" * 32, tool="no_such_tool_registered", status=McpJob.Status.WORKING)
    with tolerating(90):
        await settling.worker_lost(job, database=True)
    assert ended == [(McpJob.Status.FAILED, "Tool no_such_tool_registered ran, but its worker could not record how it "
                                            "ended: the database was unreachable for over 90 s.")]


@pytest.mark.parametrize("value", [0, -5, "60", None, True])
def test_a_tolerance_that_is_not_a_positive_number_is_e004(value):
    with tolerating(value):
        messages = mcp_checks.values_check(None)
    assert [message.id for message in messages] == ["mcp_transport.E004"]
    assert "DATABASE_OUTAGE_TOLERANCE" in messages[0].msg and repr(value) in messages[0].msg


@pytest.mark.parametrize("value", [0.5, 600])
def test_a_positive_tolerance_passes_the_checks(value):
    with tolerating(value):
        assert mcp_checks.values_check(None) == []
