"""Ordinary Celery tasks of the example project (found by Celery's autodiscover_tasks).

``mcp_tools.py`` exposes ``word_count`` as an MCP tool with ``task_tool``: its schema comes from
the signature and docstring below, and a worker runs it as a background job. It stays a plain
Celery task for the rest of the project (``word_count.delay("...")``).
"""
from typing import Annotated

from celery import shared_task
from pydantic import Field

from mcp_transport import job_context


@shared_task(soft_time_limit=30, time_limit=60)
def word_count(text: str, every: Annotated[int, Field(ge=0)] = 0) -> int:
    """Count the words of a text.

    Args:
        text: The text to count.
        every: Report progress after every this many words (0: never; at most 1,000 reports).
    """
    words = text.split()
    context = job_context()  # None when called as a plain Celery task
    if context is not None and every > 0:
        every = max(every, -(-len(words) // 1000))
        for done in range(every, len(words) + 1, every):
            context.report_progress(done, len(words))
    return len(words)
