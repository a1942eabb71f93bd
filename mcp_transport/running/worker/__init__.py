"""The worker side of background tools: the Celery task that runs a job, and the Context it gets.

A Celery pool process runs tools in its own thread, which has no event loop. The event store,
the doorbells and the control channel are asyncio code, so each process keeps one event loop
in a daemon thread (``bridge()``): a tool's Context hands every report to it and waits for it
to be stored, as a sync tool's Context does with the web process's loop. Through that loop the
process also subscribes to the control channel (cancellations reach the tool as
``ctx.cancelled``) and beats the heartbeat of the jobs it runs (a job whose heart stops is
lost: jobs/settling.py).

Celery does the rest: routing (``queue``), soft and hard time limits per tool, acks_late. The
soft limit raises SoftTimeLimitExceeded in the tool and becomes an error result; the hard limit
and a killed pool process are reported by Celery's parent process through ``task_failure``.

The modules, each importing only the ones above it in this list:

- ``loop.py``: the process's loop thread (``bridge()``), started again in a forked process;
- ``channel.py``: the job's stream as its tool's Context sees it (``JobChannel``: progress, questions
  to the client, parking), and the event store a worker appends with (``job_store``);
- ``context.py``: the Context of a sync tool (``WorkerContext``), and what a cancel stops;
- ``run.py``: the Celery task ``mcp_transport.run_job`` and the ``JobRun`` it executes;
- ``parent.py``: what Celery's parent process does (``task_failure``, the ``mcp_stop_job`` command).

Importing this package registers the task, the signal handlers and the remote control command
(apps.py imports it when Django starts). None of their names follows a module's path: the task's
is given (``name="mcp_transport.run_job"``), the command's is its function's (``mcp_stop_job``).
"""
from .loop import LoopThread, bridge  # noqa: F401
from .channel import (  # noqa: F401
    PROGRESS_WRITE_INTERVAL, JobChannel, JobParked, Status, caller_share, held_waits_limit, job_store,
    run_until_parked, worker_slots,
)
from .context import MAX_UNSENT_NOTIFICATIONS, WorkerContext  # noqa: F401
from .run import JobRun, job_context, run_job  # noqa: F401
from .parent import mcp_stop_job  # noqa: F401
