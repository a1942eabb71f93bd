"""The package's layers (docs/development.md, "Package layout"): lint-imports (import-linter)
keeps the contracts of pyproject.toml, function-level imports included."""
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def lint_imports(cwd):
    binary = Path(sys.executable).parent / "lint-imports"
    assert binary.exists(), "lint-imports is missing: `make install` installs requirements-dev.txt"
    command = [str(binary), "--no-cache", "--no-logo"]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_the_package_keeps_its_layers():
    run = lint_imports(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr


def test_an_upward_import_inside_a_function_breaks_them(tmp_path):
    # A copy of the package where state/ reaches up into running/ (as sessions.py once did to end
    # a closed session's jobs): the contracts must see it, though it hides in a function.
    shutil.copytree(ROOT / "mcp_transport", tmp_path / "mcp_transport",
                    ignore=shutil.ignore_patterns("__pycache__", "static", "templates"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    with open(tmp_path / "mcp_transport" / "state" / "sessions.py", "a") as module:
        module.write("\n\ndef _end_jobs():\n    from ..running import jobs\n\n    return jobs\n")
    run = lint_imports(tmp_path)
    assert run.returncode != 0
    assert "mcp_transport.state.sessions -> mcp_transport.running.jobs" in run.stdout, run.stdout
