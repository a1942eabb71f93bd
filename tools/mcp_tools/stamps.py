"""The benchmark tools of bench/jobs.py: progress messages carry the wall-clock time they were sent."""
import asyncio
import time

from mcp_transport import Context, tool

from ..bounds import IntervalMs, Steps


# --- Benchmark tools (bench/jobs.py): progress messages carry the wall-clock time they were sent ---

@tool(background=True, structured_output=False)
def stamp_job(steps: Steps, interval_ms: IntervalMs, ctx: Context) -> str:
    """Report progress `steps` times in a worker, each message the time.time() it was reported at.

    Args:
        steps: How many progress notifications.
        interval_ms: Milliseconds to sleep before each one.
    """
    for i in range(1, steps + 1):
        if interval_ms > 0:
            time.sleep(interval_ms / 1000)
        ctx.report_progress(i, steps, repr(time.time()))
    return f"done {steps}"


@tool(structured_output=False)
async def stamp_inline(steps: Steps, interval_ms: IntervalMs, ctx: Context) -> str:
    """stamp_job's twin run inline in the web process (the baseline for bench/jobs.py).

    Args:
        steps: How many progress notifications.
        interval_ms: Milliseconds to sleep before each one.
    """
    for i in range(1, steps + 1):
        await asyncio.sleep(interval_ms / 1000)
        await ctx.report_progress(i, steps, repr(time.time()))
    return f"done {steps}"
