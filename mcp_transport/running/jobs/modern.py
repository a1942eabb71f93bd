"""2026-07-28 calls: what a call keeps on its job in place of a session, the task a ``taskId``
names (both eras), and the questions a job waits on its client for (``inputRequests``); with
them, what a job's context and keys say in both eras (an internal failure, the related-task
``_meta``, the requests a task waits on)."""
import json
from datetime import timedelta

from django.utils import timezone

from ...conf import get_config
from ...connections import async_redis, keys
from ...protocol import mrtr
from .rows import is_job_id, load

MODERN_ERA = "2026-07-28"
RELATED_TASK = "io.modelcontextprotocol/related-task"


def modern_context(client_capabilities: dict, log_level=None) -> dict:
    """What a 2026-07-28 call keeps on its job in place of a session."""
    return {"era": MODERN_ERA, "clientCapabilities": client_capabilities, "logLevel": log_level}


def is_modern(job) -> bool:
    return (job.context or {}).get("era") == MODERN_ERA


async def load_task(task_id, principal, *, session_id=None, modern=False, by=None):
    """The task ``task_id`` names, if it is a task of this era owned by ``principal`` (and, in the
    session era, of ``session_id``); else None: another's task is as unknown as one that never
    existed. Our task ids are job ids (``new_job_id``): anything else is not looked up (a NUL,
    say, which the database would refuse in a query). An expired task is returned
    (``task_expired``): the session era tells it apart. ``by``: the Call reading it (``load``)."""
    job = await load(task_id, by=by) if is_job_id(task_id) else None
    if job is None or not job.is_task or is_modern(job) != modern or job.principal != principal:
        return None
    return job if session_id is None or job.session_id == session_id else None


def task_expired(job) -> bool:
    """Its ttl has passed: no one may read it, though its row stays until the cleanup."""
    return job.ttl_ms is not None and timezone.now() > job.created_at + timedelta(milliseconds=job.ttl_ms)


def internal_failure(job) -> dict:
    """The row fields that say a job failed for the server's reasons, not its tool's: the tasks
    extension shows those as ``failed`` (a tool's error result is ``completed``, isError)."""
    return {"context": {**(job.context or {}), "failure": "internal"}}


def failed_internally(job) -> bool:
    return (job.context or {}).get("failure") == "internal"


def inputs_key(job) -> str:
    """The questions a 2026-07-28 job waits on the client for: a hash of inputRequests key ->
    ``{"id": <reply id>, "method", "params"}``. tasks/get shows them; tasks/update and the retry
    of a call deliver their answers (``deliver_inputs``)."""
    return f"{keys().prefix}:jobinput:{job.id}"


def ahead_key(job) -> str:
    """The answers a 2026-07-28 call gave its job ahead, before any question was asked under
    their keys: a hash of inputRequests key -> the answer (JSON). Only a question the tool
    declares ``answerable_ahead`` reads it (waiting.answer_given_ahead)."""
    return f"{keys().prefix}:jobahead:{job.id}"


def answers_to_keep(answers: dict) -> dict:
    """``answers`` given ahead (key -> answer) as a job keeps them (key -> JSON), checked before
    anything is kept: at most MAX_REQUEST_STATE_BYTES, the most of a client's answers an inline
    call carries from round to round (-32602 otherwise)."""
    kept = {key: dumps(value) for key, value in answers.items()}
    size, limit = sum(len(key) + len(value) for key, value in kept.items()), get_config()["MAX_REQUEST_STATE_BYTES"]
    if size > limit:
        raise mrtr.too_much_ahead(size, limit)
    return kept


async def keep_answers_given_ahead(job, kept: dict) -> None:
    """Keep ``kept`` (``answers_to_keep``) as the answers given ahead to ``job``, in place of any
    kept before (so they are never more than one request's), for STREAM_TTL; none: nothing
    changes."""
    if not kept:
        return
    names = ahead_key(job)
    async with async_redis().pipeline(transaction=True) as pipe:
        pipe.delete(names)
        pipe.hset(names, mapping=kept)
        pipe.expire(names, get_config()["STREAM_TTL"])
        await pipe.execute()


async def pending_inputs(job) -> dict:
    """The job's unanswered questions, as ``inputRequests``."""
    entries = await async_redis().hgetall(inputs_key(job))
    return {key: {"method": entry["method"], "params": entry["params"]}
            for key, entry in ((key, json.loads(raw)) for key, raw in sorted(entries.items()))}


def related_task_meta(job) -> dict:
    return {RELATED_TASK: {"taskId": job.id}}


def pending_request_key(job) -> str:
    """The requests a task-augmented job waits on the client for (a hash: request id -> message),
    so tasks/result can send them."""
    return f"{keys().prefix}:jobpending:{job.id}"


def dumps(message) -> str:
    return json.dumps(message, separators=(",", ":"))
