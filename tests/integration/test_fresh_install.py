"""The package as a user gets it, and the tutorial as a user follows it.

``python -m build`` makes the sdist and, from it, the wheel; their contents and metadata are
checked. Then docs/tutorial.md's own blocks build a brand-new project (fresh_project.py) in a
fresh virtualenv where the wheel is installed with its dependencies from the package index (pip's
cache makes that quick): migrate, check, the tutorial's Celery worker and daphne, its client
script with the official MCP SDK (an inline and a background tool with progress, output compared
with the tutorial's), and a styled admin page (its CSS and the jobs list's script answer 200).
"""
import http.cookiejar
import re
import shlex
import subprocess
import sys
import urllib.parse
import urllib.request
import tarfile
import venv
import zipfile

import pytest

import mcp_transport
from mcpserver.embedded_redis import EmbeddedRedis
from mcp_transport.testing import free_port

from .fresh_project import ROOT, block, build, clean_env, start_daphne, start_worker
from .waiting import eventually

SUPERUSER = ("tutorial-admin", "a-long-tutorial-password")


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    """The sdist, and the wheel built from it (``python -m build``'s default)."""
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (sdist,) = out.glob("django_mcp_transport-*.tar.gz")
    (wheel,) = out.glob("django_mcp_transport-*-py3-none-any.whl")
    return sdist, wheel


@pytest.fixture(scope="module")
def wheel(dist):
    return dist[1]


def test_the_distributions_carry_the_version_and_only_the_app(dist):
    sdist, wheel = dist
    version = mcp_transport.__version__
    assert sdist.name == f"django_mcp_transport-{version}.tar.gz"
    assert wheel.name == f"django_mcp_transport-{version}-py3-none-any.whl"
    names = zipfile.ZipFile(wheel).namelist()
    for needed in ("mcp_transport/static/mcp_transport/jobs.js", "mcp_transport/static/mcp_transport/admin.css",
                   "mcp_transport/templates/admin/mcp_transport/dashboard.html",
                   "mcp_transport/migrations/0001_initial.py", "mcp_transport/management/commands/mcp_sessions.py"):
        assert needed in names, needed
    assert {name.split("/")[0] for name in names} == {"mcp_transport", f"django_mcp_transport-{version}.dist-info"}
    with tarfile.open(sdist) as archive:
        members = {name.split("/", 1)[-1] for name in archive.getnames()}
    assert {"LICENSE", "CHANGELOG.md", "README.md", "docs/tutorial.md", "pyproject.toml"} <= members


def test_the_wheel_metadata(wheel):
    metadata = zipfile.ZipFile(wheel).read(
        f"django_mcp_transport-{mcp_transport.__version__}.dist-info/METADATA").decode()
    classifiers = set(re.findall(r"^Classifier: (.+)$", metadata, re.M))
    assert {"Framework :: Django :: 5.2", "Programming Language :: Python :: 3.11",
            "Development Status :: 4 - Beta", "Topic :: Internet :: WWW/HTTP :: HTTP Servers"} <= classifiers
    assert "License-Expression: MIT" in metadata and "Requires-Python: >=3.11" in metadata
    assert f"Version: {mcp_transport.__version__}" in metadata
    assert f"## {mcp_transport.__version__}" in (ROOT / "CHANGELOG.md").read_text()


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory, wheel):
    """The tutorial's `python -m venv .venv` and `pip install django-mcp-transport` (the wheel)."""
    home = tmp_path_factory.mktemp("user")
    venv.EnvBuilder(with_pip=True).create(home / ".venv")
    done = subprocess.run(["sh", "-c", ". .venv/bin/activate && " + _install_line(wheel)], cwd=home,
                          env={**clean_env(home / ".venv" / "bin"), "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return home


def _install_line(wheel) -> str:
    """The tutorial's line that installs the wheel built in a clone (the package is not on the
    index yet), pointed at the wheel this run built."""
    (line,) = [line for line in block("install-from-source").splitlines() if line.endswith(".whl")]
    clone_dist = "path/to/django-mcp-transport/dist"
    assert line.startswith(f"pip install {clone_dist}/"), line
    return line.replace(clone_dist, shlex.quote(str(wheel.parent)))


def test_the_tutorials_build_line_builds_in_a_clone():
    lines = block("install-from-source").splitlines()
    assert lines[:2] == ["pip install build", "python -m build path/to/django-mcp-transport"]


@pytest.fixture(scope="module")
def redis():
    server = EmbeddedRedis().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def running(fresh_venv, redis, tmp_path_factory):
    env = clean_env(fresh_venv / ".venv" / "bin", REDIS_URL=redis.url)
    project = build(fresh_venv, env, superuser=SUPERUSER)
    assert project.setup == ["python -m venv .venv", ". .venv/bin/activate", "pip install django-mcp-transport"]
    logs, port = tmp_path_factory.mktemp("logs"), free_port()
    services = []
    try:
        services.append(start_worker(project, logs))
        services.append(start_daphne(project, logs, port))
        yield project, f"http://127.0.0.1:{port}"
    finally:
        for service in reversed(services):
            service.stop()


def test_the_package_comes_from_the_wheel_not_the_checkout(running):
    project, _ = running
    done = subprocess.run(["python", "-c", "import mcp_transport; print(mcp_transport.__file__)"],
                          cwd=project.root, env=project.env, capture_output=True, text=True, timeout=60)
    assert "site-packages" in done.stdout and str(ROOT) not in done.stdout, done.stdout + done.stderr


def test_the_tutorial_client_prints_what_the_tutorial_says(running, tmp_path):
    _, base = running
    script = block("client").replace("http://127.0.0.1:8000/mcp", f"{base}/mcp")
    (tmp_path / "client.py").write_text(script)
    done = subprocess.run([sys.executable, "client.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == block("client-output").strip()
    # As the tutorial says: the default client speaks 2026-07-28, which makes no session; its
    # calls are in the calls log, and the background one's job links to its call.
    browser = _Browser(base)
    browser.login("/admin/mcp_transport/mcpcall/")
    eventually(lambda: _assert("<td class=\"field-target_text\">count_slowly</td>" in
                               browser.get("/admin/mcp_transport/mcpcall/?era=2026-07-28&q=count_slowly")))
    jobs = browser.get("/admin/mcp_transport/mcpjob/?q=count_slowly")
    assert "/admin/mcp_transport/mcpcall/" in jobs and "stateles" not in jobs


def test_the_admin_is_styled_and_its_jobs_script_loads(running):
    _, base = running
    browser = _Browser(base)
    page = browser.login("/admin/mcp_transport/mcpjob/")
    assert "Select MCP job to change" in page
    sheets = re.findall(r'<link rel="stylesheet" href="([^"]+)"', page)
    scripts = re.findall(r'<script src="([^"]+)"', page)
    assert any(href.endswith("admin/css/base.css") for href in sheets), sheets
    for path in [*sheets, *scripts]:
        status, content_type = browser.fetch(path)
        assert status == 200, path
    assert any(src.endswith("mcp_transport/jobs.js") for src in scripts), scripts
    status, content_type = browser.fetch(next(href for href in sheets if href.endswith("base.css")))
    assert content_type.startswith("text/css")


class _Browser:
    """Cookies and CSRF, as the login form needs them (urllib only: nothing of the checkout's)."""

    def __init__(self, base):
        self.base = base
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

    def get(self, path) -> str:
        with self.opener.open(self.base + path, timeout=30) as reply:
            return reply.read().decode()

    def fetch(self, path):
        with self.opener.open(self.base + path, timeout=30) as reply:
            reply.read()
            return reply.status, reply.headers.get("Content-Type", "")

    def login(self, next_path) -> str:
        form = self.get(f"/admin/login/?next={next_path}")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
        data = urllib.parse.urlencode({"csrfmiddlewaretoken": token, "username": SUPERUSER[0],
                                       "password": SUPERUSER[1], "next": next_path}).encode()
        request = urllib.request.Request(f"{self.base}/admin/login/?next={next_path}", data=data,
                                         headers={"Referer": f"{self.base}/admin/login/"})
        with self.opener.open(request, timeout=30) as reply:
            return reply.read().decode()


def _assert(condition):
    assert condition
    return True
