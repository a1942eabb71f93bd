"""Background tools: a Celery worker runs them, with progress, cancellation, elicitation, retries,
time limits and MCP tasks.
"""
import time
from typing import Annotated

from celery.exceptions import SoftTimeLimitExceeded
from django.core.cache import cache
from pydantic import Field

from mcp_transport import Context, task_tool, tool

from ..bounds import CounterName, IntervalMs, Seconds, Steps, counter_key
from ..tasks import word_count


# --- Background tools: a Celery worker runs them (mcp_transport/running/jobs/) ------------------------

@tool(background=True)
def slow_job(steps: Steps, interval_ms: IntervalMs, ctx: Context) -> str:
    """Sleep `steps` times `interval_ms` in a worker, reporting progress after each step.

    Args:
        steps: How many steps to run (0 to 100000).
        interval_ms: Milliseconds to sleep before each step (0 to 10000).
    """
    for i in range(1, steps + 1):
        time.sleep(interval_ms / 1000)
        ctx.check_cancelled()  # notifications/cancelled, tasks/cancel or the admin's cancel
        ctx.report_progress(i, steps, f"step {i}")
    return f"done {steps}"


@tool(background=True, structured_output=False)
def whoami_job(ctx: Context) -> str:
    """The caller's username, from a Celery worker (``ctx.user`` is the Django user there too)."""
    return ctx.user.get_username() if ctx.user is not None and ctx.user.is_authenticated else "anonymous"


# The background tool of docs/testing.md, verbatim (tests/integration/test_testing_kit.py checks).
@tool(background=True)
def export_report(rows: Annotated[int, Field(ge=0, le=10_000)], ctx: Context,
                  delay: Annotated[float, Field(ge=0, le=1)] = 0.05) -> str:
    """Export `rows` rows in a worker, reporting progress after each one.

    Args:
        rows: How many rows to export.
        delay: Seconds each row takes.
    """
    for row in range(1, rows + 1):
        time.sleep(delay)
        ctx.report_progress(row, rows, f"row {row}")
    return f"exported {rows} rows"


@tool(background=True, structured_output=False)
def confirm_job(question: str, ctx: Context) -> str:
    """Ask the user a yes/no question from a worker (elicitation), then answer with the choice.

    Args:
        question: What to ask.
    """
    schema = {"type": "object", "properties": {"confirm": {"type": "boolean", "title": "Confirm"}},
              "required": ["confirm"]}
    answer = ctx.elicit(question, schema)
    if answer.get("action") != "accept":
        return f"The user chose to {answer.get('action')}."
    return "confirmed" if (answer.get("content") or {}).get("confirm") else "declined"


def _tick(key: CounterName, steps: Steps, interval_ms: IntervalMs, ctx: Context) -> int:
    """Count to `steps` in the counter `key`, one per interval (a visible side effect).

    Args:
        key: The name of the counter (its cache key is bounds.counter_key(key)).
        steps: How many ticks.
        interval_ms: Milliseconds between ticks.
    """
    for i in range(1, steps + 1):
        time.sleep(interval_ms / 1000)
        ctx.check_cancelled()
        cache.set(counter_key(key), i, timeout=600)
        ctx.report_progress(i, steps)
    return steps


# Not idempotent: a lost worker gives an error result. Idempotent: the job runs again.
tool(name="tick_job", background=True)(_tick)
tool(name="tick_job_idempotent", background={"max_retries": 2}, annotations={"idempotentHint": True})(_tick)


@tool(background={"soft_time_limit": 1, "time_limit": 30}, structured_output=False)
def soft_limited_job(seconds: Seconds) -> str:
    """Sleep past a 1 s soft time limit (Celery raises SoftTimeLimitExceeded in the tool).

    Args:
        seconds: How long to sleep.
    """
    time.sleep(seconds)
    return "slept"


@tool(background={"soft_time_limit": 1, "time_limit": 2}, structured_output=False)
def hard_limited_job(seconds: Seconds) -> str:
    """Ignore the 1 s soft time limit until Celery's 2 s hard limit stops the process.

    Args:
        seconds: How long to keep sleeping.
    """
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            time.sleep(0.05)
        except SoftTimeLimitExceeded:
            pass
    return "outlived the limit"


@tool(background=True, structured_output=False)
def blocking_job(seconds: Seconds, ctx: Context) -> str:
    """Say that it started, then sleep `seconds` in one call without ever looking at
    ``ctx.cancelled``: a tool blocked in a C call, which only its worker can stop.

    Args:
        seconds: How long to sleep.
    """
    ctx.report_progress(0, 1, "started")
    time.sleep(seconds)
    return f"slept {seconds} s"


@tool(background=True, task_support="required", structured_output=False)
def report_job(rows: Steps, ctx: Context) -> str:
    """A report that can only be requested as an MCP task (execution.taskSupport "required").

    Args:
        rows: How many rows to produce.
    """
    for i in range(1, rows + 1):
        ctx.report_progress(i, rows)
    return f"{rows} rows"


task_tool(word_count)
