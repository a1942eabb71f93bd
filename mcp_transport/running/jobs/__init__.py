"""Background tools: calls a Celery worker runs, and what every process may do to them.

Theory of operation. ``tools/call`` of a background tool creates an ``McpJob`` row, records the
call in Redis (as every SSE request is: control.register_call, with the job's id) and sends the
Celery task ``mcp_transport.run_job`` (worker/run.py). The web process answers with SSE and follows
the call's stream in the event store, like a resumed GET: whatever the worker appends (progress,
logs, requests to the client, the response) reaches the client through whichever web process
holds the stream, and a client that lost it resumes anywhere.

Exactly one answer. A job's status only moves forward, by conditional UPDATEs (``transition``):
whoever moves it to a terminal status (the worker with its result, a cancel, a time limit, a
lost worker) writes its answer, and the call record's ``done`` flag (HSETNX) makes the write
happen once even if two processes get there. A job whose worker stopped beating its heartbeat
is *lost*; whoever notices (the connection following the stream, a resume, tasks/get, or the
Celery parent process of a killed pool process) either queues it again, if the tool is declared
idempotent, or answers it with an error result.

Cancellation (``notifications/cancelled``, ``tasks/cancel``, the admin: ``cancel(job_id)``)
marks the job cancelled and ends its stream with no response ("Receivers ... SHOULD: Not send a
response for the cancelled request" -- spec 2025-11-25 basic/utilities/cancellation), tells the
worker through the control channel (the tool sees ``ctx.cancelled``), and revokes the Celery
task if no worker has started it yet (revoking a queued task is always safe; a running one is
asked first: a tool still running JOB_CANCEL_GRACE_SECONDS later has its pool process killed by
its worker, worker/parent.py: mcp_stop_job). A result the tool returns after that is dropped.

The modules, each importing only the ones above it in this list:

- ``rows.py``: what every part reads of a job: its row (its id, ``load``, ``transition``, riding
  out a database outage), what its context says (its era, its caller, an internal failure),
  the task a ``taskId`` names (``load_task``), its keys in Redis;
- ``outcome.py``: its end (``finish``), its answer on its stream, the ``Task`` clients see;
- ``shares.py``: each caller's share of the workers (MAX_RUNNING_JOBS_PER_CALLER) and whose turn
  a free slot is: its place among its caller's running jobs, or in its caller's line and its
  queue's, in Redis;
- ``submitting.py``: submit: its Celery options (queue, time limits, runs), creating and queueing
  it, the answers its call gave ahead; a job that may not start yet deferred, and woken when its
  turn comes;
- ``following.py``: follow: a job waiting for its client, parked or in its worker slot: its
  questions, their answers, its run queued again;
- ``settling.py``: settle: cancelling it (and the jobs of closed sessions), failing it when no
  worker takes it (JOB_QUEUE_TIMEOUT), answering or retrying it when its worker was lost;
- ``sweep.py``: the cleanup's sweep of waiting jobs.

The package exports what the eras, the pipeline and the admin call a job by (below); everything
else is imported from its module (``from ..running.jobs import following``). A test replaces a
function or sets a constant in the module that reads it (``settling.load``, ``sweep.SWEEP_BATCH``):
a name set here reaches only the callers that read it here.
"""
from .rows import Status, load, load_task
from .submitting import submit
from .settling import Stop, acancel, cancel, cancel_request, current

__all__ = ["Status", "Stop", "acancel", "cancel", "cancel_request", "current", "load", "load_task", "submit"]
