"""The cleanup reaches every job waiting for its client, however many rows it must leave alone.

sweep.expire_parked_jobs used to read one unordered page (Meta ordering: newest first) of at most
1,000 input_required rows and skip those it could not expire. Here 1,001 such rows come first:
jobs waiting in their worker slot whose worker still beats (their call records say so), which
the cleanup rightly leaves alone. Behind them waits a parked 2026-07-28 call nobody follows (a
real one: daphne, a Celery worker, Redis); before, the cleanup never reached it, so its question
never timed out and it held its caller's place for ever. It also shows what became of two rows
the cleanup used to skip for ever: a parked job whose call record is gone, and one whose
question's parked key lapsed before the cleanup came by (it runs minutes apart).
"""
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from mcp_transport.connections import keys
from mcp_transport.testing import LiveWorker, ModernClient

from .test_cleanup_beat import beat_worker, until

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 60.0
#: CLIENT_REQUEST_TIMEOUT of every process here: questions are overdue two seconds after they go out.
ASK_TIMEOUT = 2
#: One more than the single page the cleanup used to read.
STUCK = 1001
#: This run's names (file names, the stuck rows' session): CI's PostgreSQL database keeps the rows
#: of earlier runs, which must not be taken for this run's.
RUN = secrets.token_hex(4)
STUCK_SESSION = f"stuck-sweep-{RUN}"
#: The cleanup's processes: heartbeats stay fresh for half an hour, so the stuck rows' workers look alive.
CLEANUP_SETTINGS = {"CLIENT_REQUEST_TIMEOUT": ASK_TIMEOUT, "HEARTBEAT_SECONDS": 600}


@pytest.fixture(scope="module")
def sweep_env(server_env):
    return {**server_env, "CELERY_QUEUE": f"{server_env['CELERY_QUEUE']}-sweep"}


@pytest.fixture(scope="module")
def server(start_server, sweep_env):
    """A web process and a worker on a queue of their own; their questions are due after 2 s."""
    settings = json.dumps({"CLIENT_REQUEST_TIMEOUT": ASK_TIMEOUT})
    server = start_server(CELERY_QUEUE=sweep_env["CELERY_QUEUE"], MCP_TRANSPORT_JSON=settings)
    worker = LiveWorker(queue=sweep_env["CELERY_QUEUE"], cwd=ROOT,
                        env={**sweep_env, "LOG_LEVEL": "INFO", "MCP_TRANSPORT_JSON": json.dumps(
                            {"CLIENT_REQUEST_TIMEOUT": ASK_TIMEOUT, "HEARTBEAT_SECONDS": 0.3})}).start()
    yield server
    worker.stop()


def in_project(env, code: str, settings=None):
    """Run ``code`` in a process of the project (its database, its Redis); its last line, as JSON."""
    env = {**os.environ, **env, "MCP_TRANSPORT_JSON": json.dumps(settings or CLEANUP_SETTINGS)}
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


JOB = """
import json
from mcp_transport.models import McpJob
job = McpJob.objects.get(arguments__filename={filename!r})
print(json.dumps({{"id": job.id, "status": job.status, "result": job.result, "error": job.error,
                  "session_id": job.session_id, "stream_key": job.stream_key}}))
"""


def job_of(env, filename) -> dict:
    return in_project(env, JOB.format(filename=filename))


def parked_call(server, env, filename) -> dict:
    """A plain 2026-07-28 call of confirm_delete whose client never answers nor retries, once parked."""
    asked = ModernClient(server.url, {"elicitation": {}}).post(
        "tools/call", {"name": "confirm_delete", "arguments": {"filename": filename}}).json["result"]
    assert asked["resultType"] == "input_required", asked
    return until(lambda: (job := job_of(env, filename))["status"] == "input_required" and job, timeout=DEADLINE,
                 every=0.5)


MAKE_STUCK = """
import json, time
from datetime import timedelta
import redis
from django.utils import timezone
from mcp_transport.conf import redis_url
from mcp_transport.connections import keys
from mcp_transport.models import McpJob
from mcp_transport.running.jobs.rows import new_job_id
rows = [McpJob(id=new_job_id(), session_id={session!r}, stream_key=f"s{{n}}", request_id=n, tool="confirm_job",
               status="input_required") for n in range({count})]
McpJob.objects.bulk_create(rows)
McpJob.objects.filter(session_id={session!r}).update(updated_at=timezone.now() - timedelta(hours=1))
client = redis.Redis.from_url(redis_url())
with client.pipeline(transaction=False) as pipe:
    for row in rows:  # waiting in its slot: no "parked", and its worker beats
        record = keys().call(row.session_id, row.stream_key)
        pipe.hset(record, mapping={{"id": json.dumps(row.request_id), "job": row.id, "beat": int(time.time() * 1000)}})
        pipe.expire(record, 1800)
    pipe.execute()
print(McpJob.objects.filter(session_id={session!r}).count())
"""

STUCK_LEFT = """
from mcp_transport.models import McpJob
print(McpJob.objects.filter(session_id={session!r}, status="input_required").count())
"""


def stuck_left(env) -> int:
    return in_project(env, STUCK_LEFT.format(session=STUCK_SESSION))


@pytest.fixture(scope="module")
def stuck_rows(sweep_env):
    """STUCK jobs an hour into waiting in their slot, created after the parked call (the old
    query read the newest first) and waiting since before it (the new one reads the oldest first)."""
    yield lambda: in_project(sweep_env, MAKE_STUCK.format(count=STUCK, session=STUCK_SESSION))
    in_project(sweep_env, "from mcp_transport.models import McpJob; "
                          f"print(McpJob.objects.filter(session_id={STUCK_SESSION!r}).delete()[0])")


def test_the_scheduled_cleanup_reaches_a_parked_call_behind_a_thousand_rows_it_leaves_alone(
        server, sweep_env, stuck_rows, tmp_path):
    parked = parked_call(server, sweep_env, f"behind-{RUN}.txt")
    assert stuck_rows() == STUCK
    with beat_worker(sweep_env, tmp_path, settings=CLEANUP_SETTINGS):
        job = until(lambda: (job := job_of(sweep_env, f"behind-{RUN}.txt"))["status"] not in
                    ("queued", "working", "input_required") and job, timeout=DEADLINE, every=0.5)
    assert job["id"] == parked["id"]
    assert "no answer in time" in job["result"]["content"][0]["text"], job  # the tool's answer to the timeout
    assert stuck_left(sweep_env) == STUCK  # the rows it had to leave alone, left alone


SWEEP_IN_SHORT_RUNS = """
import asyncio, json
from channels.db import database_sync_to_async
from django.db.models import Q
from django.utils import timezone
from mcp_transport.models import McpJob
from mcp_transport.running import jobs
from mcp_transport.running.jobs import sweep

@database_sync_to_async
def waiting_ahead_of(job):  # the candidates the sweep reads before it, in its (updated_at, id) order
    return McpJob.objects.filter(Q(updated_at__lt=job.updated_at) | Q(updated_at=job.updated_at, id__lt=job.id),
                                 status="input_required").count()

async def main():
    sweep.SWEEP_BATCH, sweep.SWEEP_SECONDS = 500, 0  # each run stops after its first page
    while (timezone.now() - (await jobs.load({job_id!r})).updated_at).total_seconds() <= {timeout}:
        await asyncio.sleep(0.1)  # until the call is one of the candidates (waiting past its timeout)
    await sweep._save_sweep_cursor(None)  # from the oldest, whatever an earlier cleanup left
    ahead = await waiting_ahead_of(await jobs.load({job_id!r}))
    runs = []
    while len(runs) < 10 and (await jobs.load({job_id!r})).status == "input_required":
        runs.append(await sweep.expire_parked_jobs())
    print(json.dumps({{"runs": runs, "ahead": ahead}}))

asyncio.run(main())
"""


def test_runs_with_a_budget_go_on_where_the_last_one_stopped(server, sweep_env, stuck_rows):
    """SWEEP_SECONDS spent after one page of 500: the parked call is on the third page at least
    (behind the stuck rows), and the run of its page, each going on from the cursor the one
    before left, gets there."""
    parked = parked_call(server, sweep_env, f"third-page-{RUN}.txt")
    if stuck_left(sweep_env) < STUCK:
        stuck_rows()  # the first test of the module made them already, unless it ran alone
    swept = in_project(sweep_env, SWEEP_IN_SHORT_RUNS.format(job_id=parked["id"], timeout=ASK_TIMEOUT))
    # The stuck rows and any other waiting rows older than the call (earlier runs' rows in CI's
    # database) fill the pages before it: the run after them reaches it, never an earlier one.
    assert swept["ahead"] >= STUCK and len(swept["runs"]) == swept["ahead"] // 500 + 1, swept
    job = until(lambda: (job := job_of(sweep_env, f"third-page-{RUN}.txt"))["status"] not in
                ("queued", "working", "input_required") and job, timeout=DEADLINE, every=0.5)
    assert "no answer in time" in job["result"]["content"][0]["text"], job


CLEANUP = """
import asyncio, json
from mcp_transport.operations import cleanup
from mcp_transport.running.jobs import following
following.PARKED_KEY_GRACE = 0  # the test removed the keys that lapse PARKED_KEY_GRACE after the deadline
asyncio.run(cleanup())
print(json.dumps(True))
"""


def cleaned_until_it_ends(env, filename) -> dict:
    def ended():
        in_project(env, CLEANUP)
        job = job_of(env, filename)
        return job["status"] not in ("queued", "working", "input_required") and job
    return until(ended, timeout=DEADLINE, every=0.5)


def test_a_parked_call_whose_record_is_gone_fails_and_frees_its_place(server, sweep_env):
    """Its record lapsed or Redis lost it, and with it its question's parked key: no answer
    can reach it, and no worker runs it. It ends with an error result, and its caller's place
    (MAX_CALLS_PER_CALLER) is free."""
    job = parked_call(server, sweep_env, f"lost-record-{RUN}.txt")
    client = redis.Redis.from_url(sweep_env["REDIS_URL"], decode_responses=True)
    assert client.exists(keys().job_slot(job["id"]))  # the call's place, held by its job
    asked = client.hgetall(keys().job_asked(job["id"]))
    client.delete(keys().call(job["session_id"], job["stream_key"]),
                  *(keys().parked(job["session_id"], json.loads(entry)["id"]) for entry in asked.values()))

    ended = cleaned_until_it_ends(sweep_env, f"lost-record-{RUN}.txt")
    assert ended["status"] == "failed", ended
    assert "lost the call's record" in ended["error"] and ended["result"]["isError"] is True, ended
    assert not client.exists(keys().job_slot(job["id"]))


def test_a_question_whose_parked_key_lapsed_still_times_out(server, sweep_env):
    """The parked key lapses PARKED_KEY_GRACE (60 s) after the deadline, and a cleanup every
    300 s usually comes later: it found no key, took the question for answered, and the job
    waited for ever. The answers hash now decides."""
    job = parked_call(server, sweep_env, f"lapsed-key-{RUN}.txt")
    client = redis.Redis.from_url(sweep_env["REDIS_URL"], decode_responses=True)
    asked = client.hgetall(keys().job_asked(job["id"]))
    assert asked and client.delete(*(keys().parked(job["session_id"], json.loads(entry)["id"])
                                     for entry in asked.values()))

    ended = cleaned_until_it_ends(sweep_env, f"lapsed-key-{RUN}.txt")
    assert "no answer in time" in ended["result"]["content"][0]["text"], ended
