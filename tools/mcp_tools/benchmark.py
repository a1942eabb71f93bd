"""The benchmark pair, ``echo`` and ``slow_progress`` (as the SDK anchor has them), ``whoami``, and
``rationed_echo`` (a tool with a rate limit of its own)."""
import asyncio

from mcp_transport import Context, tool

from ..bounds import IntervalMs, Steps


# --- Tools: the benchmark pair (as the SDK anchor's, server_sdk.py in bench/side.py's --shared) ----
# Both are coroutines, as the anchor's are; a sync tool works the same and costs one hop to a
# worker thread per call (see client_roots in authorization.py, and bench/RESULTS.md).

@tool(annotations={"readOnlyHint": True, "openWorldHint": False})
async def echo(text: str) -> str:
    """Return text unchanged.

    Args:
        text: The text to return.
    """
    return text


@tool
async def slow_progress(steps: Steps = 100, interval_ms: IntervalMs = 100, ctx: Context = None) -> str:
    """Sleep `steps` times `interval_ms`, reporting progress after each step.

    Args:
        steps: How many steps to run (0 to 100000).
        interval_ms: Milliseconds to sleep before each step (0 to 10000).
    """
    for i in range(1, steps + 1):
        await asyncio.sleep(interval_ms / 1000)
        ctx.check_cancelled()  # stop at notifications/cancelled; a dropped stream is not a cancel
        await ctx.report_progress(i, steps, f"step {i}")
    return f"done {steps}"


@tool(structured_output=False)
def whoami(ctx: Context) -> str:
    """The caller's username ("anonymous" without one): ``ctx.user`` is the request's Django user."""
    return ctx.user.get_username() if ctx.user is not None and ctx.user.is_authenticated else "anonymous"


@tool(rate_limit="3/h", annotations={"readOnlyHint": True, "openWorldHint": False})
async def rationed_echo(text: str) -> str:
    """Return text unchanged, at most 3 times an hour per caller: a tool's own rate limit, counted
    apart from RATE_LIMIT (``@tool(rate_limit="3/h")``).

    Args:
        text: The text to return.
    """
    return text
