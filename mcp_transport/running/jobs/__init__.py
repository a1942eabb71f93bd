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
its worker, worker.stop_job). A result the tool returns after that is dropped.

The modules, each importing only the ones above it in this list:

- ``rows.py``: the job's row (its id, ``load``, ``transition``, riding out a database outage);
- ``limits.py``: its Celery options (queue, time limits) and its runs (``max_attempts``);
- ``modern.py``: 2026-07-28 calls (a job's context in place of a session, ``load_task``, the
  questions as ``inputRequests``), and the keys and context flags both eras read;
- ``answers.py``: its end (``finish``), its answer on its stream, the ``Task`` clients see;
- ``shares.py``: each caller's share of the workers (MAX_RUNNING_JOBS_PER_CALLER) and whose turn
  a free slot is: its place among its caller's running jobs, or in its caller's line and its
  queue's, in Redis; whose job it is;
- ``submitting.py``: creating and queueing it;
- ``deferring.py``: a job that may not start yet back to the queue, and woken when its turn comes;
- ``cancelling.py``: cancelling it, and the jobs of closed sessions;
- ``waiting.py``: jobs waiting for their client, parked or in their worker slot;
- ``unclaimed.py``: jobs no worker takes (JOB_QUEUE_TIMEOUT), and the command that starts one;
- ``lost.py``: jobs whose worker (or whose call record, or whose broker message) was lost;
- ``sweep.py``: the cleanup's sweep of waiting jobs.

Everyone else imports this package (``from ..running import jobs``; ``jobs.submit`` ...): every
name is here, as a copy. A test that replaces a function or sets a constant does it in the module
that reads it (``jobs.lost.load``, ``jobs.sweep.SWEEP_BATCH``).
"""
from ...methods.registry import registry  # noqa: F401  (jobs.registry, as before the split)
from ...state import control  # noqa: F401  (jobs.control, as before the split)
from .rows import (  # noqa: F401
    DATABASE_OUTAGE_ERRORS, Status, is_job_id, load, new_job_id, riding_out_database, transition,
)
from .limits import SOFT_TO_HARD_SECONDS, celery_options, max_attempts, queue_of, time_limits  # noqa: F401
from .modern import (  # noqa: F401
    MODERN_ERA, RELATED_TASK, ahead_key, answers_to_keep, dumps, failed_internally, inputs_key, internal_failure,
    is_modern, keep_answers_given_ahead, load_task, modern_context, pending_inputs, pending_request_key,
    related_task_meta, task_expired,
)
from .answers import (  # noqa: F401
    CALLER_BUSY, OTHERS_FIRST, announce, answer, error_text, finish, outcome_status, task_view, waits_for_caller,
)
from .shares import Turn, caller_of, enter_line, lease_ms, refresh_place, share_keys, take_place  # noqa: F401
from .submitting import RUN_JOB, enqueue, submit  # noqa: F401
from .deferring import DEFER_MAX_SECONDS, defer, defer_seconds, release, send_again, wake  # noqa: F401
from .cancelling import (  # noqa: F401
    CANCELLED_BY_CLIENT, CANCELLED_FROM_CODE, STOP_JOB, Stop, _revoke, _stop_running, acancel, cancel, cancel_key,
    cancel_request, closed_session_stop, end_session_jobs,
)
from .waiting import (  # noqa: F401
    NO_ANSWER, PARKED_KEY_GRACE, answer_given_ahead, asked_and_answered, deliver_inputs, expire_parked,
    expire_questions, hold_slot, parked_value, question_digest, release_slot, requeue, resume_parked,
)
from .unclaimed import (  # noqa: F401
    _queue_is_served, celery_app_name, expire_unclaimed, no_worker_text, worker_command,
)
from .lost import (  # noqa: F401
    current, deferral_lost, hard_limit_text, just_started, mark_stopped, recall, resend, watch, watch_job, worker_lost,
)
from .sweep import SWEEP_BATCH, SWEEP_SECONDS, _save_sweep_cursor, end_unreachable, expire_parked_jobs  # noqa: F401
