"""Conformance tools that send messages while they run (logging, progress) or close their stream."""
import asyncio

from mcp_transport import Context, tool

from .common import LOGGER


# --- Tools: notifications while running (these answer over SSE) ------------------------------

@tool(structured_output=False)
async def test_tool_with_logging(ctx: Context) -> str:
    """Tests tool that emits log messages during execution"""
    # "send 3 notifications/message at level info ... ~50 ms apart"; ctx.log applies the
    # level the client chose with logging/setLevel.
    await ctx.info("Tool execution started", LOGGER)
    await asyncio.sleep(0.05)
    await ctx.info("Tool processing data", LOGGER)
    await asyncio.sleep(0.05)
    await ctx.info("Tool execution completed", LOGGER)
    return "Tool with logging executed successfully"


@tool(structured_output=False)
async def test_tool_with_progress(ctx: Context) -> str:
    """Tests tool that reports progress notifications"""
    # "≥ 3 notifications, non-decreasing progress, the exact token echoed"; without a
    # progressToken, report_progress sends nothing and the tool just sleeps.
    for step in (0, 50, 100):
        if step:
            await asyncio.sleep(0.05)
        await ctx.report_progress(step, 100, f"Completed step {step} of 100")
    if ctx.progress_token is None:
        return "No progress token was given, so no progress was reported"
    return str(ctx.progress_token)


@tool(structured_output=False,
      description="Tests SSE stream disconnection and client reconnection (SEP-1699). The server closes "
                  "the stream mid-call and sends the result after the client reconnects.")
async def test_reconnection(ctx: Context) -> str:
    # "close that SSE response while the call is still running; after ~100–200 ms finish";
    # the client then gets the result by GET with Last-Event-ID.
    await ctx.info("Before disconnect", LOGGER)
    await ctx.close_stream()
    await asyncio.sleep(0.2)
    await ctx.info("After reconnect", LOGGER)
    return ("Reconnection test completed successfully. If you received this, "
            "the client properly reconnected after stream closure.")
