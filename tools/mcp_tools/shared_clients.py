"""A tool with a client of the process (``per_process``): ``count_visit`` keeps its counts in Redis
through one asyncio client made at the first call and used by every later one, on the event loop
(an async tool: no worker thread). docs/tools.md shows this module as it is.

Its pool is a BlockingConnectionPool: redis-py's plain asyncio pool opens a connection for every
command that finds none free and keeps each one open, idle, for the life of the process (40 calls
at once: 40 connections left open), and past its max_connections (100 unless set) a call fails
with MaxConnectionsError. This one opens at most MAX_CONNECTIONS, and a call past them waits up to
WAIT_SECONDS for a free one.

The pages are a fixed few: any caller may call it, so what it may add to a shared Redis is bounded
by the schema (a free-form page name would let one caller make keys without end)."""
from typing import Literal

import redis.asyncio
from django.conf import settings

from mcp_transport import ToolError, per_process, tool


#: Connections the process's client may hold at once: an INCR takes well under a millisecond,
#: so ten serve thousands of calls a second.
MAX_CONNECTIONS = 10
#: Seconds a call waits for a free connection before it fails (a Redis that stopped answering).
WAIT_SECONDS = 5


@per_process
def counters() -> redis.asyncio.Redis:
    """This process's client of the example's counters (a plain Redis URL: EXAMPLE_COUNTERS_URL)."""
    pool = redis.asyncio.BlockingConnectionPool.from_url(
        settings.EXAMPLE_COUNTERS_URL, max_connections=MAX_CONNECTIONS, timeout=WAIT_SECONDS,
        client_name="example-counters")
    return redis.asyncio.Redis.from_pool(pool)  # the client owns its pool: closing it closes both


@tool(annotations={"readOnlyHint": False, "idempotentHint": False, "openWorldHint": False})
async def count_visit(page: Literal["home", "catalogue", "about"]) -> int:
    """Count a visit of one of the library site's pages; returns the page's visits so far.

    Args:
        page: The page visited.
    """
    if not settings.EXAMPLE_COUNTERS_URL:
        raise ToolError("This example counts in a plain Redis: set EXAMPLE_COUNTERS_URL.")
    return await counters().incr(f"example:visits:{page}")
