"""The test kit (mcp_transport.testing): the example of docs/testing.md, run as a user runs it
(its conftest.py, pytest.ini and tests in a project folder of their own, pytest in a child
process) against the example project, whose tools hold the page's tool verbatim."""
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def doc_blocks() -> dict:
    """The page's code blocks that start with a ``# <path>`` comment, by that path."""
    text = (ROOT / "docs" / "testing.md").read_text()
    blocks = re.findall(r"```(?:python|ini)\n(# (\S+)\n.*?)```", text, re.S)
    return {path: block for block, path in blocks}


def test_the_documented_tool_is_the_example_projects():
    block = doc_blocks()["reports/mcp_tools.py"]
    tool = block[block.index("@tool(background=True)"):]
    assert tool in (ROOT / "tools" / "mcp_tools" / "background.py").read_text()


def run_documented_tests(tmp_path, test_file, **env):
    """The page's conftest.py, pytest.ini and one of its test files, run by pytest in a child
    process as a user's project would run them, against the example project."""
    blocks = doc_blocks()
    (tmp_path / "conftest.py").write_text(blocks["conftest.py"])
    (tmp_path / "pytest.ini").write_text(blocks["pytest.ini"].replace("myproject.settings", "mcpserver.settings"))
    (tmp_path / "tests").mkdir()
    (tmp_path / test_file).write_text(blocks[test_file])
    # The example project's settings read REDIS_URL (this run's Redis), DJANGO_SECRET_KEY
    # (tests/settings.py) and MCP_AUTH from the environment; the kit gives the live processes the rest.
    env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)


def test_the_documented_tests_pass_against_the_example_project(tmp_path):
    done = run_documented_tests(tmp_path, "tests/test_reports.py")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert re.search(r"\b3 passed\b", done.stdout), done.stdout


def test_the_documented_authorization_tests_pass_with_auth_on(tmp_path):
    """Tokens from ``mcp_token``, a person signed in through the example project's authorization
    server by ``testing.oauth``, and the 401 without a token."""
    done = run_documented_tests(tmp_path, "tests/test_private_tools.py", MCP_AUTH="on")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert re.search(r"\b3 passed\b", done.stdout), done.stdout
