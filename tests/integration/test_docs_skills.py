"""docs/skills.md: its files are the example project's, its error is the one a misnamed folder
gets, and what it says a client gets (the listing, the capabilities, its TypeScript example's
output) is what a client of a live daphne gets."""
import hashlib
import json
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from mcp_transport.methods.skill_catalog import load
from mcp_transport.testing import HttpClient

from .test_skills import ROOT, SCRIPT, SKILLS, ask, file_bytes, node


def doc() -> str:
    return (ROOT / "docs" / "skills.md").read_text()


def doc_block(after: str, language: str = "") -> str:
    """The code block right after the line ``after``."""
    match = re.search(re.escape(after) + rf"\n\n```{language}\n(.*?)```", doc(), re.S)
    assert match, after
    return match.group(1)


def test_the_page_shows_the_example_projects_skills():
    manifest = doc_block("`tools/library/skills/library-catalog/SKILL.md`:", "markdown")
    assert (SKILLS / "library-catalog" / "SKILL.md").read_text().startswith(manifest)
    excerpt = re.search(r"```python\n# tools/library/mcp_tools.py \(excerpt\)\n(.*?)```", doc(), re.S).group(1)
    assert excerpt in (ROOT / "tools" / "library" / "mcp_tools.py").read_text()
    tree = doc_block("The example project's library app ships one:")
    assert "library-catalog/" in tree and "TOOLS.md" in tree and (SKILLS / "library-catalog" / "references").is_dir()


def test_the_pages_error_is_the_one_a_misnamed_folder_gets(tmp_path):
    shown = doc_block("as a broken `@tool`\ndoes:").strip()
    folder = tmp_path / "catalog"
    shutil.copytree(SKILLS / "library-catalog", folder)
    with pytest.raises(ImproperlyConfigured) as refused:
        load(folder)
    assert shown == f"django.core.exceptions.ImproperlyConfigured: {refused.value}".replace(
        str(folder), "/srv/app/tools/library/skills/catalog")


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_the_pages_listing_and_capabilities_are_what_a_client_gets(mcp_server, version):
    listing = ask(mcp_server, None, version, "skills/list", {})["result"]
    for entry in listing["skills"]:
        for resource in entry["resources"]:
            assert resource["digest"] == f"sha256:{hashlib.sha256(file_bytes(resource['uri'])).hexdigest()}"
            resource["digest"] = "sha256:…"
    assert {"skills": listing["skills"]} == json.loads(doc_block("`skills/list`, for a caller without "
                                                                 "`library.change_book`:", "json"))
    if version == "2026-07-28":
        capabilities = ask(mcp_server, None, version, "server/discover", {})["result"]["capabilities"]
    else:
        capabilities = HttpClient(mcp_server.url).initialize().json["result"]["capabilities"]
    assert "resources" in capabilities
    shown = json.loads("{" + doc_block("`server/discover`'s (2026-07-28):", "json") + "}")
    assert capabilities["extensions"]["io.modelcontextprotocol/skills"] == \
        shown["extensions"]["io.modelcontextprotocol/skills"]


def test_the_pages_typescript_example_prints_what_the_page_says(mcp_server):
    script = doc_block("frontmatter, against the entry:", "js")
    with tempfile.NamedTemporaryFile("w", dir=SCRIPT.parent, prefix="docs-skills-", suffix=".mjs") as file:
        file.write(script)
        file.flush()
        printed = node(mcp_server.url, script=Path(file.name))
    assert printed == re.search(r"```js\n.*?```\n\n```\n(.*?)```", doc(), re.S).group(1)
