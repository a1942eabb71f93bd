"""/healthz and /readyz (mcp_transport/probes.py) against real processes: a daphne on a private
redis-server that stalls (SIGSTOP) or dies, and on a SQLite database of its own that cannot be
opened or is locked; and probed as a kubelet probes a pod, at its IP address over plain HTTP.

The bounds are the probes' promises (issue 33): a probe sent while Redis or the database does not
answer gets 503 within 3 s (READINESS_CHECK_SECONDS, 2 s, and the request itself), and within 5 s
of their return a probe gets 200 again. Each is measured with a monotonic clock around the request.
"""
import http.client
import json
import os
import re
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
NOT_READY_WITHIN = 3.0
READY_AGAIN_WITHIN = 5.0
#: What a kubelet sends: the pod's address as the Host, no X-Forwarded-Proto.
KUBELET = {"Host": "10.244.3.17:8000", "User-Agent": "kube-probe/1.33", "Accept": "*/*"}
READY = {"redis": "ok", "database": "ok"}
#: A deadline for a loaded machine, not a figure the tests measure.
START_DEADLINE = 120


def probe(server, path, method="GET", headers=KUBELET):
    """(status, body, headers, seconds the answer took) of one request on a connection of its own.
    Its socket timeout (10 s) is a third of REDIS_OUTAGE_TOLERANCE: a probe that waited on a
    stalled Redis as the app's own commands do would fail here."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        began = time.monotonic()
        connection.request(method, path, headers=headers)
        response = connection.getresponse()
        body = response.read()
        return response.status, body, dict(response.getheaders()), time.monotonic() - began
    finally:
        connection.close()


def wait_ready(server, since=None):
    """Seconds from ``since`` (a monotonic time) to the first 200 of /readyz, probing again at once."""
    since = time.monotonic() if since is None else since
    while True:
        status, body, _, _ = probe(server, "/readyz")
        if status == 200:
            assert json.loads(body) == READY
            return time.monotonic() - since
        assert time.monotonic() - since < START_DEADLINE, body


@pytest.fixture(scope="module")
def migrated(tmp_path_factory):
    """A migrated SQLite database, copied for each daphne (a migration takes a while)."""
    database = tmp_path_factory.mktemp("probes") / "migrated.sqlite3"
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, check=True,
                   env={**os.environ, "DJANGO_SETTINGS_MODULE": "mcpserver.settings",
                        "DATABASE_URL": f"sqlite:///{database}"})
    with sqlite3.connect(database) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # all of it in the one file copied
    return database


@pytest.fixture
def daphne_on(redis_server, start_server, migrated, tmp_path):
    """``daphne_on(**env)``: a daphne on ``redis_server`` and a SQLite database of its own
    (``.database``), stopped when the test ends."""
    started = []

    def start(**env):
        prefix = f"{os.environ['MCP_KEY_PREFIX']}-pr{secrets.token_hex(2)}"
        database = tmp_path / f"{prefix}.sqlite3"
        shutil.copyfile(migrated, database)
        server = start_server(REDIS_URL=redis_server.url, CELERY_BROKER_URL=redis_server.url, MCP_KEY_PREFIX=prefix,
                              CELERY_QUEUE=prefix, DATABASE_URL=f"sqlite:///{database}", **env)
        server.database = database
        started.append(server)
        wait_ready(server)
        return server

    yield start
    for server in started:
        server.stop()


def assert_not_ready(server, expected):
    status, body, headers, took = probe(server, "/readyz")
    print(f"\n/readyz {status} {body.decode()} in {took:.2f} s")
    assert (status, json.loads(body)) == (503, expected)
    assert took <= NOT_READY_WITHIN
    assert headers["Cache-Control"] == "no-store"


def assert_alive(server):
    """/healthz answers while Redis or the database does not: it asks neither."""
    status, body, _, _ = probe(server, "/healthz")
    assert (status, body) == (200, b"ok\n")


def documented_container() -> dict:
    """The web container of the Kubernetes manifest in docs/deployment.md ("Health probes")."""
    text = (ROOT / "docs" / "deployment.md").read_text()
    [manifest] = re.findall(r"### Kubernetes\n\n```yaml\n(.*?)```", text, re.S)
    [container] = yaml.safe_load(manifest)["spec"]["template"]["spec"]["containers"]
    return container


def test_the_documented_manifest_probes_the_apps_paths_on_its_port():
    from django.urls import resolve

    from mcp_transport.conf import get_config
    from mcp_transport.probes import healthz_view, readyz_view

    container = documented_container()
    [port] = container["ports"]
    assert f"tcp:port={port['containerPort']}:" in " ".join(container["command"])
    for kind, view in (("livenessProbe", healthz_view), ("readinessProbe", readyz_view)):
        probe_spec = container[kind]
        assert resolve(probe_spec["httpGet"]["path"]).func is view
        assert probe_spec["httpGet"]["port"] == port["name"]
        # A probe the kubelet stops waiting for fails without a reason: it waits out the 503.
        assert probe_spec["timeoutSeconds"] >= NOT_READY_WITHIN > get_config()["READINESS_CHECK_SECONDS"]


def test_probes_answer_a_kubelet_past_the_host_check_and_the_https_redirect(daphne_on):
    """DJANGO_HTTPS=1: every other page redirects plain HTTP to HTTPS, and a Host that
    ALLOWED_HOSTS does not list gets 400. The manifest's probes answer the kubelet all the same."""
    server = daphne_on(DJANGO_HTTPS="1")
    container = documented_container()
    liveness, readiness = (container[kind]["httpGet"]["path"] for kind in ("livenessProbe", "readinessProbe"))
    assert probe(server, liveness)[:2] == (200, b"ok\n")
    status, body, headers, _ = probe(server, readiness)
    assert (status, json.loads(body), headers["Content-Type"]) == (200, READY, "application/json")
    assert probe(server, "/healthz", "HEAD")[0] == 200
    assert probe(server, "/healthz", "POST")[0] == 405
    # The checks the probes pass are on: the same requests elsewhere are refused or redirected.
    assert probe(server, "/admin/login/")[0] == 400  # DisallowedHost
    status, _, headers, _ = probe(server, "/admin/login/", headers={**KUBELET, "Host": "127.0.0.1"})
    assert status == 301 and headers["Location"].startswith("https://")


def test_readyz_is_503_while_redis_stalls_and_200_once_it_answers(daphne_on, redis_server):
    server = daphne_on()
    os.kill(redis_server.process.pid, signal.SIGSTOP)  # a Redis that answers nothing
    try:
        assert_not_ready(server, {"redis": "no answer within 2 s", "database": "ok"})
        assert_alive(server)
        # Probes arriving together share one PING: all answered within the bound.
        answers = [None] * 4
        threads = [threading.Thread(target=lambda i=i: answers.__setitem__(i, probe(server, "/readyz")))
                   for i in range(len(answers))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert [(status, took <= NOT_READY_WITHIN) for status, _, _, took in answers] == [(503, True)] * 4
    finally:
        os.kill(redis_server.process.pid, signal.SIGCONT)
    back_at = time.monotonic()
    ready_after = wait_ready(server, back_at)
    print(f"ready {ready_after:.2f} s after Redis answered again")
    assert ready_after <= READY_AGAIN_WITHIN


def test_readyz_is_503_while_redis_is_down_and_200_once_it_is_back(daphne_on, redis_server):
    server = daphne_on()
    redis_server.process.kill()
    redis_server.process.wait()
    redis_server.stop()  # its folder; the port is kept for the restart
    assert_not_ready(server, {"redis": "failed (ConnectionError)", "database": "ok"})
    assert_alive(server)
    redis_server.start()  # an empty Redis on the same port, answering PING
    ready_after = wait_ready(server, time.monotonic())
    print(f"ready {ready_after:.2f} s after Redis was back")
    assert ready_after <= READY_AGAIN_WITHIN


def test_readyz_is_503_while_the_database_cannot_be_opened_and_200_once_it_can(daphne_on):
    """As tests/integration/test_redis_faults.py cuts a SQLite database: a directory where the
    file was, so that every new connection fails at once, as an unreachable PostgreSQL's do."""
    server = daphne_on()
    away = server.database.with_suffix(".away")
    server.database.rename(away)
    server.database.mkdir()
    try:
        assert_not_ready(server, {"redis": "ok", "database": "failed (OperationalError)"})
        assert_alive(server)
    finally:
        server.database.rmdir()
        away.rename(server.database)
    ready_after = wait_ready(server, time.monotonic())
    print(f"ready {ready_after:.2f} s after the database was back")
    assert ready_after <= READY_AGAIN_WITHIN


def test_a_stalled_redis_and_a_locked_database_at_once_cost_one_deadline(daphne_on, redis_server):
    """The checks run at once: a Redis that answers nothing and a database whose lock is held
    (its connections wait for it, up to the example settings' 20 s) still give 503 within 3 s,
    not after two deadlines, probe after probe."""
    server = daphne_on()
    holder = sqlite3.connect(server.database, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("DELETE FROM django_session")  # a write: the exclusive lock is taken now
    os.kill(redis_server.process.pid, signal.SIGSTOP)
    try:
        not_ready = {"redis": "no answer within 2 s", "database": "no answer within 2 s"}
        assert_not_ready(server, not_ready)
        assert_not_ready(server, not_ready)
        assert_alive(server)
    finally:
        os.kill(redis_server.process.pid, signal.SIGCONT)
        holder.close()  # the transaction rolled back, the lock released
    ready_after = wait_ready(server, time.monotonic())
    print(f"ready {ready_after:.2f} s after both answered again")
    assert ready_after <= READY_AGAIN_WITHIN
