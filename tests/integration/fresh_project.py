"""A brand-new Django project built from the tutorial's own code blocks (docs/tutorial.md).

The tutorial marks each block it wants followed with an HTML comment that the docs site does not
show: ``<!-- docs-test: commands -->`` (shell lines, run in order), ``<!-- docs-test: write PATH -->``
and ``<!-- docs-test: append PATH -->`` (a file of the project), ``<!-- docs-test: client -->`` (the
client script) and ``<!-- docs-test: client-output -->`` (what it prints). ``build()`` follows them
as a reader would: it runs the commands (``startproject``, ``startapp``, ``migrate``, ``check``)
and writes the files; the lines that start servers (``celery ... worker``, ``daphne ...``) are
returned for the caller to start. So the docs cannot drift from what works.
"""
import os
import re
import shlex
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "docs" / "tutorial.md"

BLOCK = re.compile(r"<!-- docs-test: (?P<kind>[\w-]+)(?: (?P<path>\S+))? -->\n```[^\n]*\n(?P<body>.*?)\n```",
                   re.DOTALL)
#: Lines the caller does itself: the virtualenv (made by the test) and the package's install.
SETUP = ("python -m venv", ". .venv/bin/activate", "pip install django-mcp-transport")
#: Lines that start long-running processes.
SERVICES = ("celery ", "daphne ")


@dataclass
class Block:
    kind: str
    path: str
    body: str


def blocks(path=TUTORIAL) -> list:
    return [Block(m["kind"], m["path"] or "", m["body"]) for m in BLOCK.finditer(path.read_text())]


def block(kind, path=TUTORIAL) -> str:
    (found,) = [b.body for b in blocks(path) if b.kind == kind]
    return found


@dataclass
class Project:
    """The project as built: its folder, the environment to run it in, its server commands."""
    root: Path
    env: dict
    services: list = field(default_factory=list)
    setup: list = field(default_factory=list)

    def service(self, name) -> list:
        """The argv of the tutorial's line starting ``name`` ("celery", "daphne")."""
        (line,) = [line for line in self.services if line.startswith(name + " ")]
        return shlex.split(line)


def clean_env(bin_dir, **extra) -> dict:
    """What a user's shell has: PATH with the virtualenv first, no settings of this repository's
    test run (its DJANGO_SETTINGS_MODULE, key prefix, queue, database)."""
    keep = {key: os.environ[key] for key in ("HOME", "LANG", "TMPDIR") if key in os.environ}
    return {**keep, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}", **extra}


def build(workdir: Path, env: dict, superuser=("admin", "admin-password")) -> Project:
    """Follow the tutorial in ``workdir`` with ``env`` (see ``clean_env``)."""
    cwd, project = workdir, Project(workdir, env)
    for item in blocks():
        if item.kind == "commands":
            cwd = _run_lines(item.body, cwd, project, superuser)
        elif item.kind in ("write", "append"):
            target = cwd / item.path
            text = item.body + "\n"
            if item.kind == "append":
                text = target.read_text() + "\n" + text
            target.write_text(text)
    project.root = cwd
    return project


def _run_lines(body, cwd, project, superuser):
    for line in body.splitlines():
        line = line.strip()
        if line.startswith(SETUP):
            project.setup.append(line)
        elif line.startswith("cd "):
            cwd = cwd / line[3:].strip()
        elif line.startswith(SERVICES):
            project.services.append(line)
        elif line:
            _run(line, cwd, project.env, superuser)
    return cwd


def _run(line, cwd, env, superuser):
    argv = shlex.split(line)
    if argv[-1] == "createsuperuser":  # interactive for a reader; the documented --noinput form here
        argv.append("--noinput")
        env = {**env, "DJANGO_SUPERUSER_USERNAME": superuser[0], "DJANGO_SUPERUSER_PASSWORD": superuser[1],
               "DJANGO_SUPERUSER_EMAIL": "admin@example.com"}
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode:
        raise AssertionError(f"`{line}` failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")


class Service:
    """A long-running command of the tutorial as a child process (own process group, log file)."""

    def __init__(self, argv, cwd, env, log_path: Path):
        self.argv, self.log_path = argv, log_path
        self.process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=log_path.open("wb"),
                                        stderr=subprocess.STDOUT, start_new_session=True)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, ready, timeout=120.0, what="ready"):
        """Wait until ``ready()`` is true (it may raise OSError while not)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"{shlex.join(self.argv)} exited with {self.process.returncode}:\n{self.log()}")
            try:
                if ready():
                    return self
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"{shlex.join(self.argv)} was not {what} within {timeout} s:\n{self.log()}")

    def stop(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def start_worker(project: Project, logs: Path) -> Service:
    worker = Service(project.service("celery"), project.root, project.env, logs / "celery.log")
    return worker.wait_for(lambda: " ready." in worker.log())


def start_daphne(project: Project, logs: Path, port: int) -> Service:
    """The tutorial's daphne line on a free port instead of 8000."""
    argv = project.service("daphne")
    server = Service([argv[0], "-p", str(port), *argv[1:]], project.root, project.env, logs / "daphne.log")
    return server.wait_for(lambda: socket.create_connection(("127.0.0.1", port), timeout=0.5).close() or True,
                           what="listening")
