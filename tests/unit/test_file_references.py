"""Every file of this repository that the package's comments and the documentation cite exists:
a path such as ``running/pipeline.py`` or ``tests/integration/test_fresh_install.py`` in
mcp_transport/**/*.py or docs/*.md names a file that is there (issue 39: nine comments still
pointed at files split up long before). A path counts when its first folder is one of the
repository's or the package's; a bare ``name.py`` is not checked, nor are the files of a
reader's own project in the documentation's code blocks (``mysite/settings.py``)."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "mcp_transport"
CITED = re.compile(r"(?<![\w./-])((?:[\w-]+/)+[\w-]+\.py)\b")
#: Cited where running/jobs.py and running/worker.py once were; the running/jobs/ regroup of
#: issue 39 (its own branch) rewrites these comments. Empty this set once it has landed.
def cited_paths(path: Path):
    """(line number, cited path) of a module's lines, or of a page's prose (not its code blocks)."""
    in_code = False
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if path.suffix == ".md" and line.lstrip().startswith("```"):
            in_code = not in_code
        if not in_code:
            yield from ((number, cited) for cited in CITED.findall(line))


def names_a_file(cited: str, citing: Path) -> bool:
    """Read from the repository, the package, or any folder above the citing file."""
    bases = [ROOT, PACKAGE, *citing.parents]
    return any((base / cited).is_file() for base in bases if ROOT in (base, *base.parents))


def ours(cited: str) -> bool:
    first = cited.split("/", 1)[0]
    return (ROOT / first).is_dir() or (PACKAGE / first).is_dir()


def test_every_cited_file_exists():
    citing = sorted(PACKAGE.glob("**/*.py")) + sorted((ROOT / "docs").glob("*.md"))
    stale = [f"{path.relative_to(ROOT)}:{number}: {cited}"
             for path in citing for number, cited in cited_paths(path)
             if ours(cited) and not names_a_file(cited, path)]
    assert not stale, "\n".join(stale)
