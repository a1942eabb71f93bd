"""JOB_QUEUE_TIMEOUT fails a call that no worker takes, never one that waits behind busy workers:
one client's long jobs filling every slot must not turn other clients' calls into errors."""
import asyncio
import json
import secrets

from mcp import Client


async def test_a_call_behind_a_busy_worker_waits_instead_of_failing(start_server, start_worker):
    queue = f"backlog-{secrets.token_hex(3)}"
    # JOB_QUEUE_TIMEOUT is also the window in which a job started or ended shows the queue is
    # served (settling._queue_is_served): 5 s leaves a loaded machine time to start the worker.
    server = start_server(CELERY_QUEUE=queue,
                          MCP_TRANSPORT_JSON=json.dumps({"JOB_QUEUE_TIMEOUT": 5, "HEARTBEAT_SECONDS": 0.5}))
    start_worker(CELERY_QUEUE=queue)  # one pool slot
    first_progress = asyncio.Event()

    async def on_progress(progress, total, message):
        first_progress.set()

    async with Client(server.url, mode="legacy") as hog, Client(server.url, mode="legacy") as other:
        # 400 x 50 ms holds the only slot for 20 s or more: several times the 5 s timeout plus
        # the stream follower's look (three 0.5 s beats, at least 2 s).
        long_call = asyncio.create_task(
            hog.call_tool("slow_job", {"steps": 400, "interval_ms": 50}, progress_callback=on_progress))
        await asyncio.wait_for(first_progress.wait(), 120)  # the slot is taken
        queued = await asyncio.wait_for(other.call_tool("slow_job", {"steps": 1, "interval_ms": 1}), 300)
        held = await asyncio.wait_for(long_call, 300)
    assert held.is_error is not True, held
    assert queued.is_error is not True, queued.content
    assert queued.structured_content == {"result": "done 1"}
