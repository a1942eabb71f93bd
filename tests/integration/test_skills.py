"""Skills (SEP-2640) on a real daphne: the TypeScript SDK's skills client (``SkillsClient`` of
``@modelcontextprotocol/client`` 2.4.0, js/ts_skills.mjs) lists the example project's skills,
gets each and reads every file back, checking each size and sha256 digest and SKILL.md's
frontmatter against the entry, in both eras; with ``MCP_AUTH=on`` each user sees the skills its
permissions allow, and a change of them takes effect at the next request. The conformance
scenarios (sep-2640-*) run in ``make conformance``; docs/skills.md is test_docs_skills.py's."""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from mcp_transport.testing import HttpClient, ModernClient

from .test_auth import new_token
from .test_toolsets import shell
from .waiting import eventually

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("js") / "ts_skills.mjs"
NODE = ROOT / "node_modules" / ".bin" / "node"  # the pinned Node 22 (make test runs npm ci)
ERAS = [("auto", "2026-07-28"), ("legacy", "2025-11-25")]
CATALOG = "skill://library-catalog/SKILL.md"
CURATION = "skill://library-curation/SKILL.md"
SKILLS = ROOT / "tools" / "library" / "skills"


def node(*args, script=SCRIPT) -> str:
    binary = str(NODE) if NODE.exists() else shutil.which("node")
    if binary is None or not (ROOT / "node_modules" / "@modelcontextprotocol" / "client").exists():
        pytest.fail("node_modules is missing: run `make test` (it runs npm ci) or `npm ci`")
    done = subprocess.run([binary, str(script), *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def skills_client(url, mode, token=None) -> dict:
    return json.loads(node(url, mode, *([token] if token else [])).strip().splitlines()[-1])


def file_bytes(uri: str) -> bytes:
    name, _, relative = uri.removeprefix("skill://").partition("/")
    folder = SKILLS if name == "library-catalog" else ROOT / "tools" / "library" / "staff_skills"
    return (folder / name / relative).read_bytes()


@pytest.mark.parametrize("mode, version", ERAS)
def test_the_typescript_skills_client_reads_every_file_verified(mcp_server, mode, version):
    seen = skills_client(mcp_server.url, mode)
    assert seen["version"] == version and seen["supported"] and seen["directoryRead"]
    assert seen["invalid"] == []
    # 2026-07-28 results are cacheable: "private", since lists vary with the caller's permissions.
    assert (seen["ttlMs"], seen["cacheScope"]) == ((60_000, "private") if version == "2026-07-28" else (None, None))
    (catalog,) = seen["skills"]  # the curation skill needs a permission nobody has here
    assert catalog["uri"] == CATALOG and catalog["frontmatter"]["name"] == "library-catalog"
    assert [(file["uri"], file["verified"], file["size"], file["mimeType"]) for file in catalog["files"]] == [
        (CATALOG, True, len(file_bytes(CATALOG)), "text/markdown"),
        ("skill://library-catalog/references/TOOLS.md", True, len(file_bytes("skill://library-catalog/references/"
                                                                               "TOOLS.md")), "text/markdown")]
    assert catalog["files"][0]["frontmatter"] == catalog["frontmatter"]
    assert catalog["directories"] == {
        "skill://library-catalog": [[CATALOG, "text/markdown"], ["skill://library-catalog/references", "inode/directory"]],
        "skill://library-catalog/references": [["skill://library-catalog/references/TOOLS.md", "text/markdown"]]}
    assert seen["unknown"] == -32602


@pytest.fixture(scope="module")
def readers(server_env):
    """Tokens of a curator (library.change_book) and of a reader (no permission)."""
    prefix = f"skills{os.getpid()}"
    shell(server_env, f"""
from django.contrib.auth.models import Permission, User
User.objects.create(username="{prefix}-curator").user_permissions.add(
    Permission.objects.get(content_type__app_label="library", codename="change_book"))
User.objects.create(username="{prefix}-reader")
""")
    return {"prefix": prefix, **{name: new_token(server_env, f"{prefix}-{name}") for name in ("curator", "reader")}}


@pytest.mark.parametrize("mode, version", ERAS)
def test_each_user_gets_and_reads_the_skills_its_permissions_allow(auth_server, readers, mode, version):
    curator = skills_client(auth_server.url, mode, readers["curator"])
    assert [skill["uri"] for skill in curator["skills"]] == [CATALOG, CURATION]
    assert all(file["verified"] for skill in curator["skills"] for file in skill["files"])
    assert [file["uri"] for file in curator["skills"][1]["files"]] == [CURATION, "skill://library-curation/checklist.md"]
    reader = skills_client(auth_server.url, mode, readers["reader"])
    assert [skill["uri"] for skill in reader["skills"]] == [CATALOG]


def ask(server, token, version, method, params) -> dict:
    """One request of ``version``'s era with ``token``: its JSON-RPC response."""
    if version == "2026-07-28":
        client = ModernClient(server.url)
        client.token = token
        return client.post(method, params).json
    client = HttpClient(server.url, token=token)
    client.initialize()
    return client.call(method, params)


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_to_a_user_without_the_permission_the_skill_does_not_exist(auth_server, readers, version):
    token = readers["reader"]
    listed = ask(auth_server, token, version, "resources/list", {})["result"]["resources"]
    skill_mds = [entry for entry in listed if entry["uri"].startswith("skill://")]
    assert skill_mds == [{"uri": CATALOG, "name": "library-catalog", "mimeType": "text/markdown",
                          "description": skill_mds[0]["description"]}]
    assert skill_mds[0]["description"].startswith("Find books and authors")
    assert ask(auth_server, token, version, "skills/get", {"uri": CURATION})["error"]["code"] == -32602
    read = ask(auth_server, token, version, "resources/read", {"uri": "skill://library-curation/checklist.md"})
    assert read["error"]["code"] == (-32602 if version == "2026-07-28" else -32002)
    directory = ask(auth_server, token, version, "resources/directory/read", {"uri": "skill://library-curation"})
    assert directory["error"]["code"] == -32602


def test_a_permission_granted_or_taken_shows_at_the_next_request(auth_server, server_env, readers):
    token, user = readers["reader"], f"{readers['prefix']}-reader"

    def listed():
        return [entry["uri"] for entry in ask(auth_server, token, "2026-07-28", "skills/list", {})["result"]["skills"]]

    change = 'from django.contrib.auth.models import Permission, User\n' \
             f'user = User.objects.get(username="{user}")\n' \
             'permission = Permission.objects.get(content_type__app_label="library", codename="change_book")\n'
    def lists(*expected):
        def check():
            assert listed() == list(expected)
        return check

    lists(CATALOG)()
    shell(server_env, change + "user.user_permissions.add(permission)")
    eventually(lists(CATALOG, CURATION))
    shell(server_env, change + "user.user_permissions.remove(permission)")
    eventually(lists(CATALOG))
