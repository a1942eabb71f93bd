"""What Celery's parent process sees of jobs: a pool process running one stopped (its hard time
limit, or it was killed), and the remote control command that kills the pool process of a
cancelled job that does not stop."""
import logging

from celery import signals
from celery.worker import state as worker_state
from celery.worker.control import control_command, ok
from celery.exceptions import TimeLimitExceeded

from ..jobs import rows, settling
from .run import run_job

logger = logging.getLogger(__name__)


@signals.task_failure.connect
def _job_failed(sender=None, task_id=None, exception=None, args=None, **_kwargs):
    """A pool process running a job stopped: Celery's hard time limit, or it was killed. This
    runs in Celery's main process (settling.mark_stopped says why it must stay simple)."""
    if getattr(sender, "name", None) != run_job.name or not args or len(args) < 3:
        return
    if isinstance(exception, TimeLimitExceeded):
        reason = "time_limit"
    elif isinstance(exception, rows.DATABASE_OUTAGE_ERRORS):
        reason = "database"  # the job's start or end could not be written (rows.riding_out_database)
    else:
        reason = "lost"
    try:
        settling.mark_stopped(args[1], args[2], reason)
    except Exception:  # the job's heartbeat stops anyway
        logger.exception("reporting the stopped job %s failed", args[0])


@control_command(args=[("task_id", str), ("grace", float)], signature="<task_id> <grace>")
def mcp_stop_job(state, task_id, grace=0.0, **_kwargs):
    """Kill the pool process running the cancelled job ``task_id`` if it still runs it ``grace``
    seconds from now (settling.acancel broadcasts it to every worker).

    Runs in Celery's main process, whose timer does not depend on the pool process: a tool
    blocked in a C call that holds the GIL stops too, which no signal handler or thread of its
    own process could make it do. It is Celery's ``revoke(terminate=True, signal="SIGKILL")``
    delayed, and only for a task still active then: one that stopped on its own (it was told
    through the control channel first) has its slot back already, and a terminate sent at once
    could hit the next task of a process that had just moved on. The pool starts a new process
    in its place; ``_job_failed`` (above) only stops the ended job's heartbeat."""
    def kill_if_still_running():
        for request in list(worker_state.active_requests):
            if request.id == task_id:
                logger.warning("job task %s did not stop within %s s of its cancel: killing its pool process %s",
                               task_id, grace, request.worker_pid)
                try:
                    request.terminate(state.consumer.pool, signal="SIGKILL")
                except Exception:  # a pool that cannot kill one process (solo, threads): the time limits still hold
                    logger.exception("killing the pool process of job task %s failed", task_id)
    # Reserved too: a job whose pool process started it a moment ago may not be active here yet.
    if not any(request.id == task_id for request in (*worker_state.active_requests, *worker_state.reserved_requests)):
        return ok("not running here")
    state.consumer.timer.call_after(max(float(grace), 0.0), kill_if_still_running)
    return ok("stopping")
