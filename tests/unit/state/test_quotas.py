"""MAX_CALLS_PER_CALLER without a round trip per call (quotas.py, issue 19): a web process admits a
busy 2026-07-28 caller's inline calls on its last count of the caller's background calls for
CALLER_COUNT_MEMORY_SECONDS, against the real Redis of the run. What the count buys is kept: a
job this process starts is seen at once, a refusal is never made on an old reading, and the
memory is bounded."""
import asyncio
import secrets

import pytest
from django.conf import settings
from django.test import override_settings

from mcp_transport.connections import async_redis
from mcp_transport.state import quotas

LIMIT = 2


@pytest.fixture
def counted_reads(monkeypatch):
    """The owners whose background calls were read from Redis, one entry per read."""
    reads, read = [], quotas.running_calls

    async def counting(key):
        reads.append(key)
        return await read(key)
    monkeypatch.setattr(quotas, "running_calls", counting)
    return reads


def limits(memory_seconds=1):
    return override_settings(MCP_TRANSPORT={**settings.MCP_TRANSPORT, "MAX_CALLS_PER_CALLER": LIMIT,
                                            "CALLER_COUNT_MEMORY_SECONDS": memory_seconds})


def new_address():
    return f"203.0.113.{secrets.randbelow(250)}-{secrets.token_hex(4)}"


async def admit(address, background=False):
    return await quotas.admit_caller_call("", address, background)


def test_a_busy_callers_calls_are_admitted_on_one_read(counted_reads):
    async def calls():
        address = new_address()
        for _ in range(20):
            await quotas.release_call(await admit(address))
        return address
    with limits():
        address = asyncio.run(calls())
    assert counted_reads == [quotas.keys().calls(quotas.caller_key("", address))]


def test_without_memory_every_call_reads_the_count(counted_reads):
    async def calls():
        address = new_address()
        for _ in range(5):
            await quotas.release_call(await admit(address))
    with limits(memory_seconds=0):
        asyncio.run(calls())
    assert len(counted_reads) == 5


def test_a_job_this_process_starts_counts_at_once(counted_reads):
    async def calls():
        address = new_address()
        await quotas.release_call(await admit(address))  # read: nothing runs in the background
        job = await admit(address, background=True)
        inline = await admit(address)  # read again: one job and this call make the limit
        with pytest.raises(quotas.LimitReached):
            await admit(address)
        await quotas.release_call(inline)
        await quotas.release_call(job)
    with limits():
        asyncio.run(calls())
    assert len(counted_reads) == 3


def test_a_job_another_process_started_goes_unseen_only_for_the_memory_and_never_refuses_wrongly(counted_reads):
    async def calls():
        address = new_address()
        key = quotas.keys().calls(quotas.caller_key("", address))
        await quotas.release_call(await admit(address))  # remembered: 0 in the background
        # Another process's background calls fill the limit (being handed to their jobs).
        elsewhere = [secrets.token_hex(8) for _ in range(LIMIT)]
        await async_redis().zadd(key, {entry: quotas._now_ms() + 60_000 for entry in elsewhere})
        # Within the memory the reading admits (the documented bound)...
        await quotas.release_call(await admit(address))
        # ...and once it is older, the count is read again and the call refused.
        count, read_at = quotas._readings[key]
        quotas._readings[key] = (count, read_at - 1)
        with pytest.raises(quotas.LimitReached):
            await admit(address)
        # A refusal is read afresh every time: the calls end, the next call is admitted at once.
        await async_redis().zrem(key, *elsewhere)
        await quotas.release_call(await admit(address))
        await async_redis().delete(key)
    with limits():
        asyncio.run(calls())
    assert len(counted_reads) == 3


def test_the_readings_kept_are_bounded(monkeypatch, counted_reads):
    monkeypatch.setattr(quotas, "_readings", type(quotas._readings)())
    monkeypatch.setattr(quotas, "READINGS_KEPT", 3)

    async def calls():
        addresses = [new_address() for _ in range(5)]
        for address in addresses:
            await quotas.release_call(await admit(address))
        return addresses
    with limits():
        addresses = asyncio.run(calls())
    kept = [quotas.keys().calls(quotas.caller_key("", address)) for address in addresses[-3:]]
    assert list(quotas._readings) == kept
