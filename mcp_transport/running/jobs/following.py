"""Following a job that waits for its client: the questions it asked, their answers, and its
run queued again once they came. A waiting job is parked (its run ended until the answers come)
or waits in its worker slot (``hold_slot``, a tool that cannot park).

A background tool that asks its client (worker.JobChannel) does not wait in its worker slot:
the question goes out (on the call's stream; for a 2026-07-28 job also as an inputRequests
entry), each keyed by its index in the call (the tool's ask count), and once the tool waits
only on answers the Celery task ends: the job is ``input_required``, "parked", with the
questions' deadlines in its call record. Each answer (streams.deliver_reply or tasks/update and
the retry of a 2026-07-28 call, on any web process) is stored under its index and queues the
job again; its tool runs from its start, gets the answers it has at once, finds the questions
still open by their index (not sent twice) and parks again until every one is answered.

Answers given ahead (2026-07-28): the answers a call's request gives under keys the job has no
open question of (the first request's, which starts the job; a retry's or ``tasks/update``'s
beside the answers it delivers) are kept for the job (submitting.keep_answers_given_ahead), and a
question the tool declares ``answerable_ahead`` takes a valid one of its key instead of being
asked (``answer_given_ahead``): then it is recorded as that question's answer, so every later
run of the call gets the same one. A request that brings none leaves the kept ones as they are.
"""
import json
import time
import uuid
from typing import Optional

from ...conf import get_config
from ...connections import async_redis, keys
from .. import replies
from ...methods.registry import registry
from ...protocol import mrtr
from ...protocol.jsonrpc import notification_message
from ...state import control
from ...storage import get_event_store
from .rows import Status, ahead_key, inputs_key, is_2026_job, json_text, load, pending_request_key, transition
from .submitting import answers_to_keep, enqueue, keep_answers_given_ahead


def parked_value(job_id: str, index: int) -> str:
    """What ``keys().parked`` holds: the job that waits for this answer, and which of its questions."""
    return f"{job_id} {index}"


async def asked_and_answered(job_id: str):
    """The questions earlier runs of the call asked (index -> entry) and their answers so far."""
    names = keys()
    async with async_redis().pipeline(transaction=False) as pipe:
        pipe.hgetall(names.job_asked(job_id))
        pipe.hgetall(names.job_answers(job_id))
        asked, answered = await pipe.execute()
    return ({int(index): json.loads(raw) for index, raw in asked.items()},
            {int(index): json.loads(raw) for index, raw in answered.items()})


async def resume_parked(value: str, reply: dict) -> bool:
    """Store the client's answer to a parked job's question (``value``: ``parked_value()``) and
    queue the job again; True if this queued it."""
    job_id, _, index = value.partition(" ")
    job = await load(job_id)
    if job is None or not index.isdigit():
        return False
    await _record_answer(job, int(index), reply)
    await async_redis().hdel(pending_request_key(job), str(reply.get("id")))
    return await requeue(job)


async def _record_answer(job, index: int, reply: dict) -> None:
    names, ttl = keys(), get_config()["STREAM_TTL"]
    async with async_redis().pipeline(transaction=False) as pipe:
        pipe.hset(names.job_answers(job.id), str(index), _answer_value(reply))
        pipe.expire(names.job_answers(job.id), ttl)
        await pipe.execute()


def _answer_value(reply: dict) -> str:
    return json_text({key: reply.get(key) for key in ("result", "error")})


async def requeue(job) -> bool:
    """Queue again a parked job (``input_required``, its run ended) that has a new answer; True
    if this call queued it. Both the answer's process and the run that parks call it (whichever
    comes second sees the other's write), and the conditional update lets one of them through."""
    job = await load(job.id)
    spec = registry.tools.get(job.tool) if job is not None else None
    if job is None or spec is None or job.status != Status.INPUT_REQUIRED:
        return False  # still running (it looks at its answers when it parks), or ended meanwhile
    if is_2026_job(job) and await _questions_open(job.id):
        # "The task MUST stay in input_required until every pending request has been answered"
        # (tasks extension, partial fulfillment): a 2026-07-28 job goes on with all its answers.
        return False
    names = keys()
    async with async_redis().pipeline(transaction=False) as pipe:
        # A beat with it: a job neither parked nor beating would look lost to settling.watch.
        pipe.hset(names.call(job.session_id, job.stream_key), "beat", int(time.time() * 1000))
        pipe.hdel(names.call(job.session_id, job.stream_key), "parked", "parked_until")
        await pipe.execute()
    retry_id = str(uuid.uuid4())
    # attempts - 1: the run that starts now goes on with the same attempt (worker.JobRun.start
    # counts one), so a lost worker's retries are not spent by the client's answers.
    if not await transition(job.id, Status.QUEUED, (Status.INPUT_REQUIRED,), where={"attempts": job.attempts},
                            celery_task_id=retry_id, attempts=job.attempts - 1,
                            message="The client answered; queued again to go on."):
        return False
    job.celery_task_id, job.status = retry_id, Status.QUEUED
    await control.beat(job.session_id, job.stream_key)
    await enqueue(job, spec)
    return True


async def _questions_open(job_id: str) -> bool:
    asked, answered = await asked_and_answered(job_id)
    return any(index not in answered for index in asked)


#: Seconds a question's parked key outlives its deadline (worker.JobChannel._send_question):
#: until then a late answer may still take it, after that nothing can.
PARKED_KEY_GRACE = 60
#: What a question nobody answered in time gets instead (the tool sees ClientRequestError).
NO_ANSWER = {"error": {"code": -32603, "message": "no answer in time"}}


async def expire_parked(session_id: str, call: dict) -> bool:
    """A parked job's questions that its client did not answer within CLIENT_REQUEST_TIMEOUT get
    the answer "no answer in time" (the tool gets ClientRequestError, as an inline wait would),
    and the client is told to stop: "the sender SHOULD issue a cancellation notification for that
    request and stop waiting for a response" -- spec 2025-11-25 basic/lifecycle (Timeouts)."""
    if int(call.get("parked_until", 0)) > time.time() * 1000:
        return False
    job = await load(call.get("job"))
    return job is not None and await expire_questions(job)


async def expire_questions(job) -> bool:
    """Answer the parked job's overdue questions "no answer in time" and queue it again; True if
    this call queued it."""
    now_ms = time.time() * 1000
    asked, answered = await asked_and_answered(job.id)
    expired = False
    for index, entry in sorted(asked.items()):
        if index in answered or entry.get("until", 0) > now_ms or not await _claim_unanswered(job, index, entry):
            continue
        await _withdraw_question(job, entry)
        await _record_answer(job, index, NO_ANSWER)
        await async_redis().hdel(pending_request_key(job), str(entry["id"]))
        expired = True
    # Every question answered but the job still parked: whoever recorded the last answer stopped
    # before queueing it, and nothing else would.
    everything_answered = bool(asked) and all(index in answered for index in asked)
    return await requeue(job) if expired or everything_answered else False


async def _claim_unanswered(job, index: int, entry: dict) -> bool:
    """Whether this call may answer the question "no answer in time": it took the question's
    parked key (no answer can take it after that), or the key has lapsed, PARKED_KEY_GRACE after
    the deadline (the cleanup runs minutes apart, CLIENT_REQUEST_TIMEOUT may exceed STREAM_TTL):
    then HSETNX of the answer lets one of two expirers through."""
    client = async_redis()
    if await client.getdel(keys().parked(job.session_id, entry["id"])):
        return True
    if time.time() * 1000 < entry.get("until", 0) + PARKED_KEY_GRACE * 1000:
        return False  # an answer (or another expirer) took it, and records it now
    return bool(await client.hsetnx(keys().job_answers(job.id), str(index), _answer_value(NO_ANSWER)))


async def _withdraw_question(job, entry: dict) -> None:
    if "key" in entry:  # a 2026-07-28 question: no longer one of the task's inputRequests
        await async_redis().hdel(inputs_key(job), entry["key"])
    else:
        cancelled = notification_message("notifications/cancelled", {"requestId": entry["id"], "reason": "timed out"})
        await get_event_store().append(job.session_id, job.stream_key, cancelled)


async def deliver_inputs(job, responses: dict, asked: Optional[dict] = None) -> list:
    """Hand the worker the answers to the questions it asked; the keys answered now. With
    ``asked`` (key -> question digest, what a 2026-07-28 call's sealed state says its round
    asked), an answer goes only to that same question. A key is claimed with HDEL, so of two
    concurrent deliveries exactly one reaches the tool. The answers to keys neither open nor
    asked are kept as answers given ahead, before any answer can queue the job again (its next
    run finds them); a question that does not take them ignores them: "The server SHOULD ignore
    the extra keys"."""
    client, answered = async_redis(), []
    entries = await client.hgetall(inputs_key(job)) if responses else {}
    await keep_answers_given_ahead(job, answers_to_keep({key: value for key, value in responses.items()
                                                         if key not in entries and key not in (asked or {})}))
    for key, value in responses.items():
        entry = json.loads(entries[key]) if key in entries else None
        if entry is None or (asked is not None and asked.get(key) != mrtr.question_digest(entry["method"],
                                                                                          entry["params"])):
            continue
        if not await client.hdel(inputs_key(job), key):
            continue
        reply = {"id": entry["id"], "result": value}
        parked = await replies.hand_over(job.session_id, reply)  # as streams.deliver_reply does
        if parked is not None:
            await resume_parked(parked, reply)
        answered.append(key)
    return answered


async def answer_given_ahead(job, index: int, key: str, method: str, params: dict, fits) -> Optional[dict]:
    """The answer given ahead under ``key`` if ``fits(method, params, answer)`` (a valid answer
    to the question), recorded as the answer to the job's question ``index`` (and what it
    asked, its digest), as a delivered answer is: later runs find it there. None otherwise."""
    raw = await async_redis().hget(ahead_key(job), key)
    found = json.loads(raw) if raw is not None else None
    if found is None or not fits(method, params, found):
        return None
    names, ttl = keys(), get_config()["STREAM_TTL"]
    async with async_redis().pipeline(transaction=True) as pipe:  # never a question without its answer
        pipe.hset(names.job_answers(job.id), str(index), _answer_value({"result": found}))
        pipe.hset(names.job_asked(job.id), str(index),
                  json_text({"digest": mrtr.question_digest(method, params), "key": key, "ahead": True}))
        pipe.expire(names.job_answers(job.id), ttl)
        pipe.expire(names.job_asked(job.id), ttl)
        await pipe.execute()
    return found


async def hold_slot(worker: str, job_id: str, limit: int, seconds: float) -> bool:
    """Count a job that waits for its client in its worker slot (one that cannot park); False,
    counting nothing, when ``limit`` of the worker's jobs wait already. A crashed process's
    entry lapses at its deadline."""
    now = time.time()
    return bool(await async_redis().eval(_HOLD_SLOT, 1, keys().held_waits(worker), now, now + seconds, job_id,
                                         limit, int(seconds * 1000) + 60000))


async def release_slot(worker: str, job_id: str) -> None:
    await async_redis().zrem(keys().held_waits(worker), job_id)


_HOLD_SLOT = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZSCORE', KEYS[1], ARGV[3]) == false and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then
  return 0
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
"""


async def pending_inputs(job) -> dict:
    """The job's unanswered questions, as ``inputRequests``."""
    entries = await async_redis().hgetall(inputs_key(job))
    return {key: {"method": entry["method"], "params": entry["params"]}
            for key, entry in ((key, json.loads(raw)) for key, raw in sorted(entries.items()))}
