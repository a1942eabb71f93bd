"""state/histograms.py: the conventions' duration histograms, counted in process and flushed to a
real Redis with the counters (metrics.flush), read back as every process's totals."""
import asyncio
import secrets
import threading

import pytest
from django.conf import settings
from django.test import override_settings

from mcp_transport.connections import async_redis, keys
from mcp_transport.state import histograms, metrics


@pytest.fixture(autouse=True)
def own_prefix():
    """A key prefix of its own, and nothing waiting from another test of this process."""
    histograms.take()
    config = {**settings.MCP_TRANSPORT, "KEY_PREFIX": f"{settings.MCP_TRANSPORT['KEY_PREFIX']}-{secrets.token_hex(3)}"}
    with override_settings(MCP_TRANSPORT=config):
        yield
    histograms.take()


def test_a_value_on_a_bound_is_in_that_bounds_bucket_and_the_last_bucket_holds_the_rest():
    for seconds in (0, 0.01, 0.010001, 300, 300.5, -1):  # a clock step back counts as 0
        histograms.observe_operation(("ping", "", "", ""), seconds)
    (counts,) = histograms.take().values()
    assert counts[:15] == [3, 1] + [0] * 11 + [1, 1]
    assert counts[15] == round((0.01 + 0.010001 + 300 + 300.5) * 1_000_000)  # microseconds


def test_threads_observing_at_once_lose_nothing():
    # A session's row closes on the session writer's thread while the loop observes requests.
    def observe():
        for _ in range(2000):
            histograms.observe_sessions([1.5])
            histograms.observe_operation(("tools/call", "echo", "", ""), 0.001)

    threads = [threading.Thread(target=observe) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    taken = histograms.take()
    assert sum(taken["session", ()][:15]) == sum(taken["operation", ("tools/call", "echo", "", "")][:15]) == 8000


def test_flushed_counts_of_several_flushes_add_up_with_what_waits():
    async def scenario():
        histograms.observe_operation(("tools/call", "echo", "", ""), 0.003)
        histograms.observe_operation(("tools/call", "echo", "", "tool_error"), 0.7)
        histograms.observe_sessions([42.0])
        await metrics.flush()
        histograms.observe_operation(("tools/call", "echo", "", ""), 0.004)
        await metrics.flush()
        histograms.observe_operation(("tools/call", "echo", "", ""), 7.0)  # not flushed: this process's own
        fields = await async_redis().hgetall(keys().histograms())
        return fields, await histograms.read()

    fields, found = asyncio.run(scenario())
    # One field per bucket touched and one per sum: the flush is a few HINCRBYs, whatever the traffic.
    assert len(fields) == 6
    counts, total = found["operation"][("tools/call", "echo", "", "")]
    assert counts == [2] + [0] * 8 + [1] + [0] * 5 and total == pytest.approx(7.007)
    assert found["operation"][("tools/call", "echo", "", "tool_error")] == ([0] * 6 + [1] + [0] * 8, 0.7)
    assert found["session"][()] == ([0] * 11 + [1] + [0] * 3, 42.0)
