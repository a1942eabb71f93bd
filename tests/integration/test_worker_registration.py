"""Background tools in a brand-new project: its Celery worker, started as the tutorial says
(Celery's Django recipe and nothing more), runs them; a call no worker takes gets an error
result after JOB_QUEUE_TIMEOUT; ``check --deploy --tag mcp_transport_workers`` asks the workers.

The project is built from docs/tutorial.md (fresh_project.py) and runs this checkout's code from
this suite's virtualenv, on a Redis of its own: Celery's broadcasts (the check's pings) reach
every worker on a broker, and other test runs' workers must not answer them.
"""
import asyncio
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcp import Client

from mcpserver.embedded_redis import EmbeddedRedis
from mcp_transport.testing import free_port

from .fresh_project import ROOT, Service, block, build, clean_env, start_daphne, start_worker

pytestmark = pytest.mark.filterwarnings("ignore:The logging capability is deprecated")

#: What this test adds to the tutorial's project: a short queue timeout, fast heartbeats (so a
#: stuck job is looked at within a second or two), the cleanup every second, and a tool on a
#: queue no worker consumes.
EXTRA_SETTINGS = 'MCP_TRANSPORT = {"JOB_QUEUE_TIMEOUT": 1, "HEARTBEAT_SECONDS": 0.5, "CLEANUP_INTERVAL": 1}\n'
EXTRA_TOOL = '''

@tool(background={"queue": "nobody"})
def unclaimed() -> str:
    """A background tool on a queue that no worker consumes."""
    return "never"
'''


@pytest.fixture(scope="module")
def redis():
    server = EmbeddedRedis().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def project(tmp_path_factory, redis):
    env = clean_env(Path(sys.executable).parent, REDIS_URL=redis.url, PYTHONPATH=str(ROOT))
    built = build(tmp_path_factory.mktemp("fresh"), env)
    with (built.root / "mysite" / "settings.py").open("a") as settings:
        settings.write(EXTRA_SETTINGS)
    with (built.root / "hello" / "mcp_tools.py").open("a") as tools:
        tools.write(EXTRA_TOOL)
    return built


@pytest.fixture(scope="module")
def services(project, tmp_path_factory):
    logs, port = tmp_path_factory.mktemp("logs"), free_port()
    started = []
    try:
        started.append(start_worker(project, logs))
        started.append(start_daphne(project, logs, port))
        yield f"http://127.0.0.1:{port}/mcp", started[0]
    finally:
        for service in reversed(started):
            service.stop()


def check_workers(project, **env):
    return subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--tag", "mcp_transport_workers"],
                          cwd=project.root, env={**project.env, **env}, capture_output=True, text=True, timeout=120)


async def test_the_recipe_worker_runs_a_background_tool(services):
    url, worker = services
    assert "mcp_transport.run_job" in worker.log()  # Celery lists the tasks it knows at start-up
    seen = []

    async def progress(done, total, message):
        seen.append((done, total, message))

    async with Client(url) as client:
        result = await asyncio.wait_for(client.call_tool("count_slowly", {"to": 2}, progress_callback=progress), 120)
    assert result.is_error is not True, result
    assert result.content[0].text == "Counted to 2."
    assert seen == [(1, 2, "1 of 2"), (2, 2, "2 of 2")]


def test_the_tutorials_worker_runs_the_cleanup_the_app_scheduled(services, project):
    """The tutorial's project schedules nothing itself: the app put mcp_transport.cleanup on
    beat's schedule, and the tutorial's worker (with -B) runs it."""
    _, worker = services
    assert "CELERY_BEAT_SCHEDULE" not in (project.root / "mysite" / "settings.py").read_text()
    finished = re.compile(r"Task mcp_transport\.cleanup\[[-\w]+\] succeeded")
    worker.wait_for(lambda: "Sending due task mcp-transport-cleanup (mcp_transport.cleanup)" in worker.log()
                    and finished.search(worker.log()), what="running the cleanup")


async def test_a_call_no_worker_takes_gets_an_error_result(services):
    url, _ = services
    started = time.monotonic()
    async with Client(url) as client:
        result = await asyncio.wait_for(client.call_tool("unclaimed", {}), 120)
    assert result.is_error is True
    text = result.content[0].text
    assert text.startswith("No worker took tool unclaimed within 1 s") and "'nobody'" in text, text
    assert "(celery -A mysite worker -Q nobody)" in text, text  # the project's own Celery app
    # Bounded: the timeout, then the next look of the stream's follower (a few heartbeats).
    assert time.monotonic() - started < 60


def test_workers_check_warns_of_the_unconsumed_queue(services, project):
    done = check_workers(project)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "mcp_transport.W006" in output and "nobody" in output
    assert "celery -A mysite worker -Q nobody" in output, output
    assert "mcp_transport.E008" not in output


def test_workers_check_names_a_worker_that_does_not_know_the_task(services, project, tmp_path, redis):
    (tmp_path / "bare.py").write_text('import os\nfrom celery import Celery\n\napp = Celery("bare", broker=os.environ["REDIS_URL"])\n')
    bare = Service([sys.executable, "-m", "celery", "-A", "bare", "worker", "-n", "bare@%h", "-l", "info"],
                   tmp_path, clean_env(Path(sys.executable).parent, REDIS_URL=redis.url), tmp_path / "bare.log")
    try:
        bare.wait_for(lambda: " ready." in bare.log())
        done = check_workers(project)
    finally:
        bare.stop()
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "mcp_transport.E008" in output and "bare@" in output, output
    assert output.count("mcp_transport.E008") == 1  # the project's own worker knows the task


def test_workers_check_says_when_no_worker_answers(project, redis):
    done = check_workers(project, REDIS_URL=redis.url.rsplit("/", 1)[0] + "/5")  # a broker nobody consumes
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "mcp_transport.W006" in output and "No Celery worker answered" in output
    assert "Start one with: celery -A mysite worker" in output, output


async def test_runserver_serves_the_endpoint_with_daphne_first_among_the_apps(services, project, tmp_path):
    """The tutorial's line for runserver: with it, Django's development server is daphne's and
    answers on /mcp (without it, runserver serves only the WSGI side: 404)."""
    settings = project.root / "mysite" / "settings_runserver.py"
    settings.write_text("from .settings import *  # noqa\n" + block("runserver-settings") + "\n")
    port = free_port()
    env = {**project.env, "DJANGO_SETTINGS_MODULE": "mysite.settings_runserver", "PYTHONUNBUFFERED": "1"}
    server = Service([sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
                     project.root, env, tmp_path / "runserver.log")
    try:
        server.wait_for(lambda: socket.create_connection(("127.0.0.1", port), timeout=0.5).close() is None,
                        what="listening")
        assert "Starting ASGI/Daphne" in server.log()
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            result = await asyncio.wait_for(client.call_tool("greet", {"name": "runserver"}), 60)
    finally:
        server.stop()
    assert result.content[0].text == "Hello, runserver!"
