"""Jobs no worker takes: failed after JOB_QUEUE_TIMEOUT unless their queue is served, and the
command that starts a worker consuming a queue."""
import logging
from datetime import timedelta

from channels.db import database_sync_to_async
from django.db.models import Q
from django.utils import timezone

from ...conf import get_config
from ...methods.content import error_result
from ...logs import short_id
from ...models import McpJob
from ...methods.registry import registry
from .answers import finish
from .limits import queue_of
from .cancelling import _revoke
from .rows import Status

logger = logging.getLogger(__name__)


async def expire_unclaimed(job) -> bool:
    """Fail a job that no worker took within JOB_QUEUE_TIMEOUT (no worker runs, none consumes
    its queue, or they do not know the task and discard it), so that its client gets an error
    result instead of waiting in silence; revoke it, so that a worker starting later skips it."""
    timeout = get_config()["JOB_QUEUE_TIMEOUT"]
    if timeout is None or (timezone.now() - job.updated_at).total_seconds() < timeout:
        return False
    queue = queue_of(registry.tools.get(job.tool))
    if await _queue_is_served(queue, timeout):
        # Busy workers are a backlog, not a missing worker: one client filling the queue with
        # long jobs must not fail every other client's call after JOB_QUEUE_TIMEOUT.
        return False
    text = no_worker_text(job.tool, queue, timeout)
    if not await finish(job, Status.FAILED, error_result(text), error=text, allowed=(Status.QUEUED,),
                        where={"celery_task_id": job.celery_task_id}):
        return False  # a worker took it meanwhile
    logger.warning("job %s (%s): %s", short_id(job.id), job.tool, text)
    await _revoke(job)
    return True


@database_sync_to_async
def _queue_is_served(queue: str, window_seconds: float) -> bool:
    """A worker consumes the queue: one of its jobs is running, or a worker started or finished
    one in the window. The finish counts too: between a long job's end and the worker taking the
    next job, nothing runs and the long job started long ago, yet the queue is served."""
    tools = [name for name, spec in registry.tools.items() if spec.background and queue_of(spec) == queue]
    since = timezone.now() - timedelta(seconds=window_seconds)
    running = (Q(status__in=(Status.WORKING, Status.INPUT_REQUIRED)) | Q(started_at__gte=since)
               | Q(started_at__isnull=False, finished_at__gte=since))
    return McpJob.objects.filter(running, tool__in=tools).exists()


def no_worker_text(tool: str, queue: str, timeout) -> str:
    return (f"No worker took tool {tool} within {timeout:g} s: start a Celery worker of this project "
            f"({worker_command(queue)}) that consumes the queue {queue!r}.")


def worker_command(queue: str | None = None) -> str:
    """The command that starts a worker of this project's Celery app, consuming the queue when it
    is not Celery's default one (the worker's default)."""
    from celery import current_app

    command = f"celery -A {celery_app_name()} worker"
    if queue and queue != current_app.conf.task_default_queue:
        command += f" -Q {queue}"
    return command


def celery_app_name() -> str:
    """What ``celery -A`` takes for this project: its Celery app's main name (Celery's Django
    recipe: ``Celery("mysite")`` in mysite/celery.py), else the package of the settings module."""
    import os

    from celery import current_app

    main = current_app.main
    if main and main != "__main__":
        return main
    settings_module = os.environ.get("DJANGO_SETTINGS_MODULE", "")
    return settings_module.split(".")[0] or "<project>"
