"""``slow_query``: one database statement that takes as long as asked, to show (and test) what
bounds a tool's database time: STATEMENT_TIMEOUT_SECONDS (or ``@tool(statement_timeout=...)``)
stops it, and a 2026-07-28 client that closes its response cancels it."""
from typing import Annotated

from django.db import connection
from pydantic import Field

from mcp_transport import tool


@tool(structured_output=False, annotations={"readOnlyHint": True, "openWorldHint": False})
def slow_query(seconds: Annotated[float, Field(ge=0, le=600)]) -> str:
    """Run one database statement that takes about `seconds` (PostgreSQL: pg_sleep; SQLite: a
    counting query of about that length).

    Args:
        seconds: How long the statement runs (0 to 600).
    """
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_sleep(%s)", [seconds])
        else:
            cursor.execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < %s) "
                           "SELECT count(*) FROM c", [int(seconds * 3_000_000)])
    return f"The statement ran {seconds:g} s."
