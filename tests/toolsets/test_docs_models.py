"""docs/models.md ("Expose your models"): its code is the example project's, and its test file
passes when run by pytest as a user's project runs it."""
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def doc_blocks() -> dict:
    """The page's code blocks that start with a ``# <path>`` comment, by that path (``<path>
    (excerpt)`` for a part of a file)."""
    text = (ROOT / "docs" / "models.md").read_text()
    return {path + excerpt: block
            for path, excerpt, block in re.findall(r"```python\n# (\S+)( \(excerpt\))?\n(.*?)```", text, re.S)}


def test_the_page_shows_the_example_projects_code():
    blocks = doc_blocks()
    assert blocks["tools/library/mcp_tools.py"] == (ROOT / "tools" / "library" / "mcp_tools.py").read_text()
    assert blocks["tools/library/admin.py"] in (ROOT / "tools" / "library" / "admin.py").read_text()
    assert blocks["tools/library/api.py"] == (ROOT / "tools" / "library" / "api.py").read_text()
    assert blocks["tools/library/mcp_tools.py (excerpt)"] in (ROOT / "tools" / "library" / "mcp_tools.py").read_text()
    listener = ROOT / "tests" / "integration" / "test_model_subscriptions.py"
    assert blocks["tests/integration/test_model_subscriptions.py"] in listener.read_text()


def test_the_pages_test_file_passes(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_books.py").write_text(doc_blocks()["tests/test_books.py"])
    # The page's own database (SQLite, the example project's default): with DATABASE_URL the child
    # pytest-django would create the same test database this run already holds (CI's PostgreSQL).
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DJANGO_SETTINGS_MODULE": "tests.settings"}
    env.pop("DATABASE_URL", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                           str(tmp_path / "tests")], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert re.search(r"\b4 passed\b", done.stdout), done.stdout
