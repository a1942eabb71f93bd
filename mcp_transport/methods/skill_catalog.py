"""Skills (SEP-2640, docs/skills.md), found the way Django finds templates and static files: a
``skills/<name>/SKILL.md`` folder in any installed app (``discover``, when the app is ready), or
registered in code (``skill(folder)``, e.g. in an app's mcp_tools.py)::

    from mcp_transport import skill

    skill(Path(__file__).parent / "staff_skills" / "restock", permission="library.change_book")

A skill is read once, when it is found: its files' bytes, sizes and digests are kept, so what
``resources/read`` serves is exactly what ``skills/list`` digested. Its files become resources
(``skill://<path>/<file>``; SKILL.md in resources/list, the others read by URI) with the skill's
``permission`` and ``scopes``: a caller sees and reads the skills it may use, as with tools
(auth.may_use). A skill that breaks a rule of the extension or of the Agent Skills format stops
the start with ImproperlyConfigured naming its folder and the rule, as a bad ``@tool`` fails at
import: "Servers SHOULD NOT serve a skill exceeding 512 resource entries ... 16 MiB", the name,
the frontmatter.
"""
import math
import mimetypes
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import yaml
from django.apps import apps
from django.core.exceptions import ImproperlyConfigured

from ..auth import access
from ..protocol import skills as wire
from .registry import ResourceSpec, registry

#: The folder of an installed app whose subfolders are skills (as "templates" and "static" are).
APP_FOLDER = "skills"
#: Files and folders a skill leaves out, as collectstatic ignores them by default.
IGNORED = re.compile(r"\..*|__pycache__|.*~|.*\.py[co]")


class SkillProblem(ValueError):
    """What is wrong with a skill (ImproperlyConfigured names its folder)."""


@dataclass(frozen=True)
class SkillFile:
    """One file of a skill, as served: ``resources/read`` gives text when the bytes are UTF-8 (a
    client digests the UTF-8 of that text: the same bytes), else a base64 blob."""

    uri: str
    path: str
    data: bytes = field(repr=False)
    mime_type: str
    digest: str

    @property
    def size(self) -> int:
        return len(self.data)

    async def read(self):
        try:
            return self.data.decode("utf-8")
        except UnicodeDecodeError:
            return self.data

    def entry(self) -> dict:
        """The file in a skill entry's ``resources``."""
        return {"uri": self.uri, "digest": self.digest, "size": self.size}


@dataclass
class SkillSpec:
    """One skill: its path (``name``, or ``prefix/.../name``), its SKILL.md's frontmatter, its
    files by URI (SKILL.md first), who may use it (auth.may_use) and where it came from."""

    path: str
    frontmatter: dict
    files: dict
    origin: str
    permission: Optional[str] = None
    scopes: tuple = ()

    @property
    def uri(self) -> str:
        return wire.skill_uri(self.path)

    @property
    def name(self) -> str:
        return self.frontmatter["name"]

    @property
    def total_bytes(self) -> int:
        return sum(file.size for file in self.files.values())

    def describe(self) -> dict:
        """Its entry in skills/list and skills/get: "uri", the frontmatter "rendered verbatim as a
        JSON object", and "resources": every file "each exactly once", SKILL.md included."""
        return {"uri": self.uri, "frontmatter": self.frontmatter,
                "resources": [file.entry() for file in self.files.values()]}


# -- reading a skill ------------------------------------------------------------------------------

def load(source, *, prefix: str = "", permission=None, scopes=(), origin: str = "code") -> SkillSpec:
    """The skill in the folder ``source``, or in ``source`` = {relative path: str or bytes}."""
    where = "registered in code" if isinstance(source, dict) else str(source)
    try:
        if isinstance(source, dict):
            files, folder_name = _from_mapping(source), None
        else:
            files, folder_name = _from_folder(Path(source)), Path(source).name
        return _make(files, folder_name, prefix.strip("/"), permission=permission, scopes=scopes, origin=origin)
    except SkillProblem as exc:
        raise ImproperlyConfigured(f"The skill {where}: {exc}.") from None


def _from_folder(folder: Path) -> dict:
    """Its files' bytes by relative path, counted and sized before any is read."""
    if not (folder / wire.MANIFEST).is_file():
        raise SkillProblem(f"has no {wire.MANIFEST}")
    found, total = [], 0
    for directory, subfolders, names in os.walk(folder):
        subfolders[:] = sorted(name for name in subfolders if not IGNORED.fullmatch(name))
        for name in sorted(names):
            if IGNORED.fullmatch(name):
                continue
            path = Path(directory) / name
            found.append(path)
            total += path.stat().st_size
            _check_limits(len(found), total)
    return {path.relative_to(folder).as_posix(): path.read_bytes() for path in found}


def _from_mapping(source: dict) -> dict:
    files = {}
    for relative, content in source.items():
        segments = relative.split("/") if isinstance(relative, str) else [""]
        if any(segment in ("", ".", "..") for segment in segments):
            raise SkillProblem(f"the file name {relative!r} must be a relative path without empty, '.' or '..' parts")
        if not isinstance(content, (str, bytes)):
            raise SkillProblem(f"the content of {relative} must be str or bytes")
        files[relative] = content.encode("utf-8") if isinstance(content, str) else content
        _check_limits(len(files), sum(map(len, files.values())))
    return files


def _check_limits(count: int, total: int) -> None:
    if count > wire.MAX_FILES:
        raise SkillProblem(f"has more than {wire.MAX_FILES} files, the most a skill may have")
    if total > wire.MAX_BYTES:
        raise SkillProblem(f"holds more than {wire.MAX_BYTES} bytes (16 MiB), the most a skill may hold")


def _make(files: dict, folder_name, prefix: str, **options) -> SkillSpec:
    manifest = files.get(wire.MANIFEST)
    if manifest is None:
        raise SkillProblem(f"has no {wire.MANIFEST}")
    try:
        frontmatter = parse_frontmatter(manifest.decode("utf-8"))
    except UnicodeDecodeError:
        raise SkillProblem(f"its {wire.MANIFEST} is not UTF-8 text") from None
    name = frontmatter["name"]
    if folder_name is not None and folder_name != name:
        raise SkillProblem(f"its name {name!r} must be its folder's name {folder_name!r}")
    path = f"{prefix}/{name}" if prefix else name
    problem = wire.path_problem(path)
    if problem:
        raise SkillProblem(problem)
    order = [wire.MANIFEST, *sorted(relative for relative in files if relative != wire.MANIFEST)]
    served = {}
    for relative in order:
        uri = wire.file_uri(path, relative)
        served[uri] = SkillFile(uri=uri, path=relative, data=files[relative],
                                mime_type=_mime_type(relative, files[relative]), digest=wire.digest(files[relative]))
    return SkillSpec(path=path, frontmatter=frontmatter, files=served, **options)


def _mime_type(relative: str, data: bytes) -> str:
    if relative == wire.MANIFEST:
        return wire.MANIFEST_MIME_TYPE  # "mimeType SHOULD be text/markdown"
    guessed = mimetypes.guess_type(relative)[0]
    if guessed:
        return guessed
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "application/octet-stream"
    return "text/plain"


# -- SKILL.md's frontmatter -----------------------------------------------------------------------

class _CoreSchemaLoader(yaml.SafeLoader):
    """YAML 1.2's core schema, which hosts parse frontmatter with (the TypeScript SDK's
    SkillsClient, the conformance harness), where PyYAML reads YAML 1.1: ``yes``, ``off``,
    ``2024-01-01`` and ``0755`` are strings and 755 there, so a host comparing the entry's
    frontmatter with the file's ("Any discrepancy MUST be treated as a verification failure")
    reads what this server read."""


_YAML_11_SCALARS = {f"tag:yaml.org,2002:{kind}" for kind in ("null", "bool", "int", "float", "timestamp")}
_CoreSchemaLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _YAML_11_SCALARS]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
for _tag, _pattern, _first in (
        ("null", r"~|null|Null|NULL|", ["~", "n", "N", ""]),
        ("bool", r"true|True|TRUE|false|False|FALSE", list("tTfF")),
        ("int", r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+", list("-+0123456789")),
        ("float", r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)",
         list("-+.0123456789"))):
    _CoreSchemaLoader.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", re.compile(f"^(?:{_pattern})$"), _first)


def _core_int(loader, node) -> int:
    text = loader.construct_scalar(node)
    if text.startswith(("0o", "0x")):
        return int(text[2:], 8 if text[1] == "o" else 16)
    return int(text, 10)  # "0755" is 755 in YAML 1.2, not an octal


_CoreSchemaLoader.add_constructor("tag:yaml.org,2002:int", _core_int)


def parse_frontmatter(text: str) -> dict:
    """The YAML between SKILL.md's first two ``---`` lines (a BOM and CRLFs aside), checked:
    "SKILL.md MUST begin with YAML frontmatter containing at minimum the name and description
    fields"; everything in it must be JSON, as the entry carries it "verbatim as a JSON object"."""
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    if not text.startswith("---\n"):
        raise SkillProblem(f"its {wire.MANIFEST} must begin with a '---' line, its YAML frontmatter's start")
    closing = re.search(r"^---[ \t]*$", text[4:], re.M)
    if closing is None:
        raise SkillProblem(f"the frontmatter of its {wire.MANIFEST} has no closing '---' line")
    try:
        frontmatter = yaml.load(text[4:4 + closing.start()], Loader=_CoreSchemaLoader)  # noqa: S506 (safe: SafeLoader's)
    except (yaml.YAMLError, ValueError) as exc:
        raise SkillProblem(f"the frontmatter of its {wire.MANIFEST} is not YAML: {exc}") from None
    _check_frontmatter(frontmatter)
    return frontmatter


def _check_frontmatter(frontmatter) -> None:
    if not isinstance(frontmatter, dict):
        raise SkillProblem("its frontmatter must be a mapping of keys to values")
    problem = _not_json(frontmatter, "frontmatter")
    if problem:
        raise SkillProblem(problem)
    problem = wire.name_problem(frontmatter.get("name"))
    if problem:
        raise SkillProblem(f"in its frontmatter, {problem}")
    description, compatibility = frontmatter.get("description"), frontmatter.get("compatibility", "-")
    if not isinstance(description, str) or not 0 < len(description) <= wire.MAX_DESCRIPTION:
        raise SkillProblem(f"its frontmatter's description must be text of 1-{wire.MAX_DESCRIPTION} characters")
    if not isinstance(compatibility, str) or not 0 < len(compatibility) <= wire.MAX_COMPATIBILITY:
        raise SkillProblem(f"its frontmatter's compatibility must be text of 1-{wire.MAX_COMPATIBILITY} characters")
    metadata = frontmatter.get("metadata", {})
    if not isinstance(metadata, dict) or not all(isinstance(value, str) for value in metadata.values()):
        raise SkillProblem("its frontmatter's metadata must map keys to text")


def _not_json(value, where: str) -> Optional[str]:
    """Why ``value`` is not what JSON holds (a date, a number key, infinity), or None."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{where} has the key {key!r}, which is not text: quote it"
            problem = _not_json(item, f"{where}.{key}")
            if problem:
                return problem
        return None
    if isinstance(value, list):
        return next((problem for index, item in enumerate(value) if (problem := _not_json(item, f"{where}[{index}]"))),
                    None)
    if value is None or isinstance(value, (str, bool, int)):
        return None
    if isinstance(value, float) and math.isfinite(value):
        return None
    return f"{where} is {value!r}, which JSON cannot hold: quote it"


# -- serving ------------------------------------------------------------------------------------

def register(spec: SkillSpec) -> SkillSpec:
    """Serve ``spec``: in skills/list, its files as resources (SKILL.md listed, "name SHOULD be
    set from the name field of the SKILL.md YAML frontmatter", its description likewise). A
    skill at the same URI is replaced, files and all."""
    replaced = registry.skills.pop(spec.uri, None)
    for uri in replaced.files if replaced is not None else ():
        registry.resources.pop(uri, None)
    registry.skills[spec.uri] = spec
    for file in spec.files.values():
        manifest = file.path == wire.MANIFEST
        registry.resources[file.uri] = ResourceSpec(
            uri=file.uri, func=file.read, name=spec.name if manifest else file.path,
            description=spec.frontmatter["description"] if manifest else None, mime_type=file.mime_type,
            permission=spec.permission, scopes=spec.scopes, listed=manifest)
    return spec


def skill(source, *, prefix: str = "", permission: Optional[str] = None, scopes=None) -> SkillSpec:
    """Publish the skill in the folder ``source`` (a path; its name is the folder's, which its
    SKILL.md's ``name`` must be), or in a mapping {relative path: str or bytes} (its name is
    the frontmatter's). ``prefix`` ("acme/billing") places it at ``skill://acme/billing/<name>``;
    ``permission`` ("app_label.codename") and ``scopes`` (token scopes) say who may see and read
    it, as a tool's do. A skill registered in code replaces one found at the same URI."""
    return register(load(source, prefix=prefix, **access(permission, scopes)))


def discover() -> list:
    """Publish each ``skills/<path>/SKILL.md`` folder of the installed apps, in INSTALLED_APPS
    order: the first of two at one URI wins (as the first template of a name does), and a skill
    code already registered at that URI stays. A folder without SKILL.md under ``skills/`` is a
    prefix (``skills/acme/billing/refunds/``: ``skill://acme/billing/refunds/SKILL.md``)."""
    found = []
    for app in apps.get_app_configs():
        root = Path(app.path) / APP_FOLDER
        for folder in _skill_folders(root):
            relative = folder.relative_to(root).as_posix()
            if wire.skill_uri(relative) in registry.skills:
                continue
            found.append(register(load(folder, prefix=relative.rpartition("/")[0], origin=f"app {app.name}")))
    return found


def _skill_folders(folder: Path):
    if not folder.is_dir():
        return
    for child in sorted(folder.iterdir()):
        if not child.is_dir() or IGNORED.fullmatch(child.name):
            continue
        if (child / wire.MANIFEST).is_file():
            yield child  # what lies below is the skill's own (a nested skill is its supporting files)
        else:
            yield from _skill_folders(child)
