"""Dashboard samples (samples.py) against the real Redis: one sample per interval slot across
processes, capped, oldest first when read."""
import secrets

import pytest
from django.conf import settings
from django.test import override_settings

from mcp_transport.state import metrics, samples

pytestmark = pytest.mark.django_db(transaction=True)


def _config(prefix=None, **extra):
    prefix = prefix or f"{settings.MCP_TRANSPORT['KEY_PREFIX']}-samples-{secrets.token_hex(3)}"
    return override_settings(MCP_TRANSPORT={**settings.MCP_TRANSPORT, "KEY_PREFIX": prefix, **extra})


async def test_one_sample_per_slot_whoever_offers():
    with _config(DASHBOARD_SAMPLE_SECONDS=3600, DASHBOARD_SAMPLES=10):
        taken = [await samples.maybe_take() for _ in range(3)]  # three processes' rounds in one slot
        assert taken.count(True) == 1
        assert len(await samples.recent()) == 1


async def test_another_interval_does_not_silence_this_one():
    shared = f"{settings.MCP_TRANSPORT['KEY_PREFIX']}-samples-{secrets.token_hex(3)}"
    with _config(shared, DASHBOARD_SAMPLE_SECONDS=3600, DASHBOARD_SAMPLES=10):
        assert await samples.maybe_take()  # a process sampling hourly took this hour's
    with _config(shared, DASHBOARD_SAMPLE_SECONDS=0.05, DASHBOARD_SAMPLES=10):
        assert await samples.maybe_take()  # one sampling faster still takes its own
        assert len(await samples.recent()) == 2


async def test_samples_are_capped_and_read_oldest_first_with_the_counters():
    with _config(DASHBOARD_SAMPLES=3):
        for n in range(5):
            metrics.incr("get_requests", 10)
            await metrics.flush()
            await samples.take()
        kept = await samples.recent()
        assert len(kept) == 3
        assert [sample["get_requests"] for sample in kept] == [30, 40, 50]
        assert kept[0]["t"] <= kept[1]["t"] <= kept[2]["t"]
        assert "store" not in kept[0] and "buffer_entries" in kept[0] and "open_streams" in kept[0]
