"""The package's layers (docs/development.md, "Package layout"): lint-imports (import-linter)
keeps the contracts of pyproject.toml, function-level imports included."""
import ast
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


def test_an_era_that_admits_or_records_a_call_itself_breaks_them(tmp_path):
    # Admission, release and the calls-log record are the run phase's (running/pipeline.py):
    # an era doing one of them again would be the second copy that drifts.
    shutil.copytree(ROOT / "mcp_transport", tmp_path / "mcp_transport",
                    ignore=shutil.ignore_patterns("__pycache__", "static", "templates"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    with open(tmp_path / "mcp_transport" / "eras" / "modern_2026" / "era.py", "a") as module:
        module.write("\n\ndef _admit():\n    from ...state import quotas\n\n    return quotas\n")
    run = lint_imports(tmp_path)
    assert run.returncode != 0
    assert "mcp_transport.eras.modern_2026.era -> mcp_transport.state.quotas" in run.stdout, run.stdout


#: What a reader takes in at a glance (docs/architecture.md).
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 500, 60


def _sources():
    for package in ("mcp_transport", "tools"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path


def test_no_module_is_over_500_lines_and_no_function_over_60():
    too_long = []
    for path in _sources():
        source = path.read_text()
        name = path.relative_to(ROOT)
        if len(source.splitlines()) > MAX_MODULE_LINES:
            too_long.append(f"{name}: {len(source.splitlines())} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    too_long.append(f"{name}:{node.lineno} {node.name}: {lines} lines")
    assert not too_long, "\n".join(too_long)
