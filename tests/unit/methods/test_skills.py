"""Skills (SEP-2640): the wire rules (protocol/skills.py), reading and checking a skill
(methods/skill_catalog.py) and its methods in both eras (methods/skills.py), on a fresh
``Registry()`` per test. The TypeScript SDK's skills client and the conformance scenarios read
the example project's skills from a live server: tests/integration/test_skills.py."""
import base64
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from mcp_transport.admin import skills as admin_skills
from mcp_transport.auth import Principal
from mcp_transport.eras.modern_2026 import methods as modern_methods
from mcp_transport.methods import (apps, dispatch, listing, method_table, resources_prompts, skill_catalog, skills,
                                   tool_calls)
from mcp_transport.methods.registry import Registry
from mcp_transport.protocol import skills as wire
from mcp_transport.protocol.errors import InvalidParams, ResourceNotFound
from mcp_transport.protocol.jsonrpc import Request
from mcp_transport.state.sessions import SessionRecord

MANIFEST = """---
name: {name}
description: Does {name} things.
---

# {name}

See [the form](references/FORM.md).
"""


@pytest.fixture
def reg(monkeypatch):
    fresh = Registry()
    for module in (method_table, listing, tool_calls, resources_prompts, skills, skill_catalog, admin_skills, apps):
        monkeypatch.setattr(module, "registry", fresh)
    return fresh


class User:
    def __init__(self, *perms):
        self.perms = set(perms)

    def has_perm(self, perm):
        return perm in self.perms


def call_as(*perms):
    """A call by nobody (no perms), or by a user with these permissions."""
    principal = Principal(key="user:1", user_id=1, user=User(*perms)) if perms else None
    return dispatch.Call(session=SessionRecord(id="x" * 32, protocol_version="2025-11-25"), principal=principal)


async def run(method, params=None, call=None):
    return await dispatch.dispatch(Request(id=1, method=method, params=params or {}), call or call_as())


def publish(name="pdf-tools", prefix="", **options):
    return skill_catalog.skill({"SKILL.md": MANIFEST.format(name=name), "references/FORM.md": "# Form\n",
                                "scripts/fill.bin": b"\x89\x00\xff"}, prefix=prefix, **options)


# -- the wire --------------------------------------------------------------------------------------

def test_digests_are_sha256_of_the_raw_bytes_in_lowercase_hex():
    assert wire.digest(b"") == "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


@pytest.mark.parametrize("name, ok", [("git-workflow", True), ("a", True), ("a" * 64, True), ("a" * 65, False),
                                      ("Git", False), ("-a", False), ("a-", False), ("a--b", False), ("", False),
                                      ("a_b", False), (None, False)])
def test_the_agent_skills_naming_rule(name, ok):
    assert (wire.name_problem(name) is None) is ok


def test_file_uris_escape_each_segment_of_the_files_path():
    assert wire.skill_uri("acme/billing/refunds") == "skill://acme/billing/refunds/SKILL.md"
    assert wire.file_uri("faq", "Q&A/a b.md") == "skill://faq/Q%26A/a%20b.md"


def test_a_directorys_children_are_its_files_and_subdirectories():
    files = [(uri, uri) for uri in ("skill://a/SKILL.md", "skill://a/refs/x.md", "skill://a/refs/deep/y.md",
                                    "skill://acme/b/SKILL.md")]
    assert wire.directory_children("skill://a", files) == {
        "skill://a/SKILL.md": "skill://a/SKILL.md",
        "skill://a/refs": {"uri": "skill://a/refs", "name": "refs", "mimeType": "inode/directory"}}
    assert list(wire.directory_children("skill://a/refs/", files)) == ["skill://a/refs/x.md", "skill://a/refs/deep"]
    assert list(wire.directory_children("skill://acme", files)) == ["skill://acme/b"]  # a prefix is a directory
    for not_a_directory in ("skill://a/SKILL.md", "skill://nothing", "skill://", "skill:/", "file:///a", 7,
                            "skill://a?x"):
        assert wire.directory_children(not_a_directory, files) is None, not_a_directory


# -- reading a skill -------------------------------------------------------------------------------

def write_skill(folder: Path, name: str, files=None) -> Path:
    skill = folder / name
    (skill / "references").mkdir(parents=True)
    (skill / "SKILL.md").write_text(MANIFEST.format(name=name))
    (skill / "references" / "FORM.md").write_text("# Form\n")
    for relative, content in (files or {}).items():
        (skill / relative).parent.mkdir(parents=True, exist_ok=True)
        (skill / relative).write_bytes(content)
    return skill


def test_a_folder_is_read_whole_and_digested(reg, tmp_path):
    folder = write_skill(tmp_path, "pdf-tools", {".DS_Store": b"x", "__pycache__/a.pyc": b"x", "notes.txt~": b"x",
                                                 "logo.png": b"\x89PNG\r\n"})
    spec = skill_catalog.skill(folder)
    assert spec.uri == "skill://pdf-tools/SKILL.md"
    assert [file.path for file in spec.files.values()] == ["SKILL.md", "logo.png", "references/FORM.md"]
    entry = spec.describe()
    assert entry["frontmatter"] == {"name": "pdf-tools", "description": "Does pdf-tools things."}
    manifest = (folder / "SKILL.md").read_bytes()
    assert entry["resources"][0] == {"uri": spec.uri, "digest": wire.digest(manifest), "size": len(manifest)}


def test_the_frontmatter_is_read_as_yaml_1_2_as_clients_read_it():
    frontmatter = skill_catalog.parse_frontmatter(
        "\ufeff---\r\nname: a\r\ndescription: d\r\nreviewed: yes\r\nsince: 2026-01-01\r\nmode: 0755\r\n"
        "flags: [true, off, ~, 0x1f, 0o17, 1.5e3]\r\n---\r\nbody\r\n")
    assert frontmatter == {"name": "a", "description": "d", "reviewed": "yes", "since": "2026-01-01", "mode": 755,
                           "flags": [True, "off", None, 31, 15, 1500.0]}


@pytest.mark.parametrize("files, message", [
    ({"README.md": "x"}, "has no SKILL.md"),
    ({"SKILL.md": "name: a\n"}, "must begin with a '---' line"),
    ({"SKILL.md": "---\nname: a\n"}, "no closing '---' line"),
    ({"SKILL.md": "---\nname: [a\n---\n"}, "is not YAML"),
    ({"SKILL.md": "---\n- a\n---\n"}, "must be a mapping"),
    ({"SKILL.md": "---\nname: Bad_Name\ndescription: d\n---\n"}, "the name 'Bad_Name' must be"),
    ({"SKILL.md": "---\nname: a\n---\n"}, "description must be text of 1-1024"),
    ({"SKILL.md": "---\nname: a\ndescription: d\nsize: .inf\n---\n"}, "frontmatter.size is inf, which JSON"),
    ({"SKILL.md": "---\nname: a\ndescription: d\n1: one\n---\n"}, "has the key 1, which is not text"),
    ({"SKILL.md": "---\nname: a\ndescription: d\nmetadata: {n: 1}\n---\n"}, "metadata must map keys to text"),
    ({"SKILL.md": b"---\nname: a\ndescription: \xff\n---\n"}, "is not UTF-8"),
    ({"SKILL.md": MANIFEST.format(name="a"), "../up.md": "x"}, "must be a relative path"),
])
def test_a_broken_skill_stops_the_start_naming_the_rule(reg, files, message):
    with pytest.raises(ImproperlyConfigured, match=f"^The skill registered in code: .*{message}"):
        skill_catalog.skill(files)
    assert reg.skills == {} and reg.resources == {}


def test_a_folder_skills_name_is_its_folders(reg, tmp_path):
    folder = write_skill(tmp_path, "catalog")
    (folder / "SKILL.md").write_text(MANIFEST.format(name="library-catalog"))
    with pytest.raises(ImproperlyConfigured) as refused:
        skill_catalog.skill(folder)
    assert str(refused.value) == (f"The skill {folder}: its name 'library-catalog' must be its folder's name "
                                  "'catalog'.")


def test_the_limits_are_checked_before_any_file_is_read(reg, tmp_path, monkeypatch):
    many = write_skill(tmp_path, "many", {f"f{i:03}.md": b"x" for i in range(wire.MAX_FILES - 1)})
    big = write_skill(tmp_path, "big")
    with (big / "huge.bin").open("wb") as huge:
        huge.truncate(wire.MAX_BYTES)  # sparse: stat says 16 MiB
    monkeypatch.setattr(Path, "read_bytes", lambda self: pytest.fail(f"{self} was read"))
    with pytest.raises(ImproperlyConfigured, match="has more than 512 files"):
        skill_catalog.skill(many)
    with pytest.raises(ImproperlyConfigured, match=r"holds more than 16777216 bytes \(16 MiB\)"):
        skill_catalog.skill(big)


def test_discovery_finds_each_apps_skills_folders_and_code_wins(reg, tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    write_skill(first / "skills", "pdf-tools")
    write_skill(first / "skills" / "acme" / "billing", "refunds")
    write_skill(second / "skills", "pdf-tools", {"extra.md": b"second app's"})
    write_skill(second / "skills", "mine")
    apps = [SimpleNamespace(path=str(first), name="first"), SimpleNamespace(path=str(second), name="second"),
            SimpleNamespace(path=str(tmp_path / "none"), name="none")]
    monkeypatch.setattr(skill_catalog.apps, "get_app_configs", lambda: apps)
    code = skill_catalog.skill({"SKILL.md": MANIFEST.format(name="mine")}, permission="app.use_mine")
    found = skill_catalog.discover()
    assert [spec.uri for spec in found] == ["skill://acme/billing/refunds/SKILL.md", "skill://pdf-tools/SKILL.md"]
    assert reg.skills["skill://mine/SKILL.md"] is code
    assert "skill://pdf-tools/extra.md" not in reg.resources  # the first app's skill won
    assert reg.skills["skill://pdf-tools/SKILL.md"].origin == "app first"
    replaced = skill_catalog.skill(first / "skills" / "pdf-tools", permission="app.use_pdf")  # code replaces
    assert reg.skills["skill://pdf-tools/SKILL.md"] is replaced
    assert reg.resources["skill://pdf-tools/references/FORM.md"].permission == "app.use_pdf"


# -- the methods -----------------------------------------------------------------------------------

async def test_the_extension_and_resources_are_declared_in_both_eras_once_a_skill_exists(reg):
    assert "extensions" not in dispatch.capabilities() and not dispatch.declares("skills")
    with pytest.raises(Exception, match="Method not found"):
        await run("skills/list")
    publish()
    declared = {"io.modelcontextprotocol/skills": {"directoryRead": True}}
    assert dispatch.capabilities()["extensions"] == declared and "resources" in dispatch.capabilities()
    assert dispatch.initialize_result("2025-11-25")["capabilities"]["extensions"] == declared
    reg.tool(lambda: None, name="job", background=True)  # the 2026 era adds the tasks extension
    extensions = modern_methods.capabilities()["extensions"]
    assert set(extensions) == {*declared, "io.modelcontextprotocol/tasks"} and extensions.items() >= declared.items()


async def test_skills_list_pages_whole_entries(reg):
    for index in range(5):
        publish(f"skill-{index}")
    pages, params = [], {}
    with override_settings(MCP_TRANSPORT={"PAGE_SIZE": 2}):
        while True:
            page = await run("skills/list", params)
            pages.append([entry["uri"] for entry in page["skills"]])
            assert all(len(entry["resources"]) == 3 for entry in page["skills"])
            if "nextCursor" not in page:
                break
            params = {"cursor": page["nextCursor"]}
    assert pages == [[f"skill://skill-{i}/SKILL.md" for i in pair] for pair in ((0, 1), (2, 3), (4,))]
    with pytest.raises(InvalidParams):
        await run("skills/list", {"cursor": "not one of ours"})


async def test_skills_get_answers_the_entry_and_minus_32602_for_an_unknown_uri(reg):
    spec = publish()
    assert await run("skills/get", {"uri": spec.uri}) == {"skill": spec.describe()}
    for unknown in ("skill://nope/SKILL.md", "skill://pdf-tools/references/FORM.md"):
        with pytest.raises(InvalidParams, match="No skill of this server has the URI"):
            await run("skills/get", {"uri": unknown})
    with pytest.raises(InvalidParams):
        await run("skills/get", {"uri": 7})


async def test_files_are_resources_and_only_skill_md_is_listed(reg):
    spec = publish(prefix="acme")
    listed = (await run("resources/list"))["resources"]
    assert listed == [{"uri": "skill://acme/pdf-tools/SKILL.md", "name": "pdf-tools",
                       "description": "Does pdf-tools things.", "mimeType": "text/markdown"}]
    read = await run("resources/read", {"uri": spec.uri})
    assert read["contents"] == [{"uri": spec.uri, "mimeType": "text/markdown", "text": MANIFEST.format(name="pdf-tools")}]
    blob = (await run("resources/read", {"uri": "skill://acme/pdf-tools/scripts/fill.bin"}))["contents"][0]
    assert base64.b64decode(blob["blob"]) == b"\x89\x00\xff" and blob["mimeType"] == "application/octet-stream"


async def test_directory_read_lists_direct_children_in_pages(reg):
    publish()
    root = await run("resources/directory/read", {"uri": "skill://pdf-tools"})
    assert root == {"resources": [
        {"uri": "skill://pdf-tools/SKILL.md", "name": "SKILL.md", "mimeType": "text/markdown",
         "size": len(MANIFEST.format(name="pdf-tools"))},
        {"uri": "skill://pdf-tools/references", "name": "references", "mimeType": "inode/directory"},
        {"uri": "skill://pdf-tools/scripts", "name": "scripts", "mimeType": "inode/directory"}]}
    with override_settings(MCP_TRANSPORT={"PAGE_SIZE": 2}):
        first = await run("resources/directory/read", {"uri": "skill://pdf-tools"})
        rest = await run("resources/directory/read", {"uri": "skill://pdf-tools", "cursor": first["nextCursor"]})
    assert first["resources"] + rest["resources"] == root["resources"] and "nextCursor" not in rest
    for not_a_directory in ("skill://pdf-tools/SKILL.md", "skill://other", "test://static"):
        with pytest.raises(InvalidParams, match="is not a directory of this server's skills"):
            await run("resources/directory/read", {"uri": not_a_directory})


async def test_a_skill_needing_a_permission_does_not_exist_for_others(reg):
    public, staff = publish("pdf-tools"), publish("restock", permission="library.change_book")
    for caller, seen in ((call_as(), [public.uri]), (call_as("library.view_book"), [public.uri]),
                         (call_as("library.change_book"), [public.uri, staff.uri])):
        assert sorted(entry["uri"] for entry in (await run("skills/list", call=caller))["skills"]) == sorted(seen)
        assert sorted(r["uri"] for r in (await run("resources/list", call=caller))["resources"]) == sorted(seen)
        if staff.uri in seen:
            assert (await run("skills/get", {"uri": staff.uri}, caller))["skill"]["uri"] == staff.uri
            await run("resources/read", {"uri": "skill://restock/references/FORM.md"}, caller)
            await run("resources/directory/read", {"uri": "skill://restock"}, caller)
            continue
        with pytest.raises(InvalidParams):
            await run("skills/get", {"uri": staff.uri}, caller)
        with pytest.raises(ResourceNotFound):
            await run("resources/read", {"uri": "skill://restock/references/FORM.md"}, caller)
        with pytest.raises(InvalidParams):
            await run("resources/directory/read", {"uri": "skill://restock"}, caller)


def test_2026_results_carry_private_cache_hints():
    for method in ("skills/list", "skills/get", "resources/directory/read"):
        assert modern_methods.cache_hint(method) == (60_000, "private")
        assert method in modern_methods.METHODS


def test_the_admin_lists_each_skill_with_its_files(reg):
    publish("restock", permission="library.change_book")
    (row,) = admin_skills.rows()
    assert row["uri"] == "skill://restock/SKILL.md" and row["who"] == "permission library.change_book"
    assert [file.path for file in row["files"]] == ["SKILL.md", "references/FORM.md", "scripts/fill.bin"]
    assert row["total_bytes"] == len(MANIFEST.format(name="restock")) + len("# Form\n") + 3
