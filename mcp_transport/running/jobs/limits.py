"""How Celery runs a tool's jobs: its queue and time limits, and how often an idempotent one runs
again after its worker died."""
from ...conf import get_config


def queue_of(spec) -> str:
    """The queue a tool's jobs are sent to: its own, or Celery's default queue."""
    from celery import current_app

    queue = spec.job_options.get("queue") if spec is not None else None
    return queue or current_app.conf.task_default_queue


def max_attempts(spec) -> int:
    """Runs of an idempotent tool whose workers keep dying: Celery's ``max_retries`` + 1."""
    retries = spec.job_options.get("max_retries")
    return (3 if retries is None else retries) + 1


#: Seconds between a tool's own soft time limit and the hard one it gets when it sets only the
#: soft one, past the default hard limit: time to clean up after SoftTimeLimitExceeded.
SOFT_TO_HARD_SECONDS = 60


def time_limits(spec) -> tuple:
    """The (soft, hard) Celery time limits of a tool's jobs: its own, else JOB_SOFT_TIME_LIMIT
    and JOB_TIME_LIMIT. A soft limit at or past the hard one would never fire: a tool that
    sets only a hard limit below the default soft one has none, and one that sets only a soft
    limit past the default hard one gets a hard limit SOFT_TO_HARD_SECONDS after it."""
    config, options = get_config(), spec.job_options if spec is not None else {}
    soft, hard = options.get("soft_time_limit"), options.get("time_limit")
    if soft is None and hard is None:
        soft, hard = config["JOB_SOFT_TIME_LIMIT"], config["JOB_TIME_LIMIT"]
    elif soft is None:
        default = config["JOB_SOFT_TIME_LIMIT"]
        soft = default if default is not None and default < hard else None
    elif hard is None:
        default = config["JOB_TIME_LIMIT"]
        hard = default if default is not None and default > soft else soft + SOFT_TO_HARD_SECONDS
    return soft, hard


def celery_options(spec) -> dict:
    """Per-call Celery options: the queue routes the job, the limits are Celery's own."""
    soft, hard = time_limits(spec)
    options = {"queue": spec.job_options.get("queue"), "soft_time_limit": soft, "time_limit": hard}
    return {key: value for key, value in options.items() if value is not None}
