"""A tool with a client of the process (``per_process``): ``count_visit`` keeps its counts in Redis
through one asyncio client made at the first call and used by every later one, on the event loop
(an async tool: no worker thread). docs/tools.md shows this module as it is.

The pages are a fixed few: any caller may call it, so what it may add to a shared Redis is bounded
by the schema (a free-form page name would let one caller make keys without end)."""
from typing import Literal

import redis.asyncio
from django.conf import settings

from mcp_transport import ToolError, per_process, tool


@per_process
def counters() -> redis.asyncio.Redis:
    """This process's client of the example's counters (a plain Redis URL: EXAMPLE_COUNTERS_URL)."""
    return redis.asyncio.Redis.from_url(settings.EXAMPLE_COUNTERS_URL, client_name="example-counters")


@tool(annotations={"readOnlyHint": False, "idempotentHint": False, "openWorldHint": False})
async def count_visit(page: Literal["home", "catalogue", "about"]) -> int:
    """Count a visit of one of the library site's pages; returns the page's visits so far.

    Args:
        page: The page visited.
    """
    if not settings.EXAMPLE_COUNTERS_URL:
        raise ToolError("This example counts in a plain Redis: set EXAMPLE_COUNTERS_URL.")
    return await counters().incr(f"example:visits:{page}")
