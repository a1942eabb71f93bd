"""Bounds on the example tools' arguments: a caller may make a tool run or write only so much.

Each is a pydantic constraint, so it is in the tool's ``inputSchema`` and a call outside it gets
an error result naming the argument before the tool runs (a background tool before its job is
queued). The cache keys the counting tools write live in their own namespace (``counter_key``):
a caller names a counter, never a key of the project's cache (a rate limit's counter, a
session), which it could otherwise overwrite.
"""
from typing import Annotated

from pydantic import Field

#: Steps of the looping tools: each one sleeps and reports progress.
Steps = Annotated[int, Field(ge=0, le=100_000)]
#: Milliseconds a tool sleeps per step: together with Steps, at most ten seconds a step.
IntervalMs = Annotated[int, Field(ge=0, le=10_000)]
#: Seconds one sleeping tool may ask for.
Seconds = Annotated[float, Field(ge=0, le=3_600)]
#: The name of a counter (letters, digits, ``_.-``), not a cache key.
CounterName = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")]

#: Prefix of every cache key the counting tools write.
COUNTER_PREFIX = "tools:counter:"


def counter_key(name: str) -> str:
    """The cache key of the counter ``name`` (tick_job, count_inline)."""
    return COUNTER_PREFIX + name
