"""The database rows the servers wrote, read by a process of the project (its settings, its
database) rather than by the test process, whose Django settings are the unit tests'."""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_JOB_ONCE = """
import json, time
from mcp_transport.models import McpJob
end = time.monotonic() + {deadline}
while True:
    job = McpJob.objects.filter(**{lookup!r}).first()
    if (job is not None and job.status in {statuses!r}) or time.monotonic() > end:
        break
    time.sleep(0.1)
print(json.dumps(None if job is None else {{"status": job.status, "error": job.error,
                                            "started": job.started_at is not None, "attempts": job.attempts}}))
"""


def job_once(env, statuses, deadline=60.0, **lookup) -> dict | None:
    """The job matching ``lookup`` (``arguments__key="..."``) once its status is one of
    ``statuses`` (waiting at most ``deadline`` seconds in one process), as a dict; None if no
    such job exists."""
    code = _JOB_ONCE.format(deadline=deadline, lookup=lookup, statuses=list(statuses))
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, **env}, timeout=deadline + 120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])
