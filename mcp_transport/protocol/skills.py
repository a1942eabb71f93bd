"""The skills extension (``io.modelcontextprotocol/skills``, SEP-2640) on the wire, without I/O:
its identifier, the form of a skill's URIs and names, digests, the per-skill limits, and the
children of a directory resource.

"Each file within a skill directory is exposed as an MCP resource ... ``skill://<skill-path>/
<file-path>``"; "The final segment of <skill-path> MUST equal the skill's name"; the skill's root
directory is ``skill://<skill-path>`` ("the /SKILL.md suffix removed, no trailing slash").
"""
import hashlib
import re
from typing import Iterable, Optional
from urllib.parse import quote, unquote

EXTENSION = "io.modelcontextprotocol/skills"
SCHEME = "skill://"
MANIFEST = "SKILL.md"
MANIFEST_MIME_TYPE = "text/markdown"
#: "A directory resource is a resource whose mimeType is inode/directory."
DIRECTORY_MIME_TYPE = "inode/directory"
#: "Servers SHOULD NOT serve a skill exceeding 512 resource entries ... whose total file size
#: exceeds 16 MiB" (the hosts' interoperability limits: they MUST accept skills up to these).
MAX_FILES = 512
MAX_BYTES = 16 * 1024 * 1024
#: The Agent Skills naming rule: "1-64 characters, lowercase alphanumeric and hyphens, no
#: leading, trailing or consecutive hyphens".
NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
#: A prefix segment of a skill path (the first one is the URI's authority: "SHOULD be a valid
#: reg-name per RFC 3986").
PREFIX_SEGMENT = re.compile(r"[a-z0-9](?:[a-z0-9._-]*[a-z0-9])?")
#: What a file name's segment keeps unescaped in its URI: RFC 3986's unreserved characters.
_SAFE = "-._~"


def digest(data: bytes) -> str:
    """"SHA-256 hashes of an artifact's raw bytes, formatted as sha256:{hex} where {hex} is 64
    lowercase hexadecimal characters"."""
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


def name_problem(name) -> Optional[str]:
    """Why ``name`` is not a skill name, or None."""
    if not isinstance(name, str) or not name or len(name) > MAX_NAME or not NAME.fullmatch(name):
        return (f"the name {name!r} must be 1-{MAX_NAME} lowercase letters, digits and single hyphens, "
                "neither first nor last")
    return None


def path_problem(skill_path: str) -> Optional[str]:
    """Why ``skill_path`` (``prefix/.../name``) cannot be a skill's path, or None."""
    *prefix, name = skill_path.split("/")
    bad = [segment for segment in prefix if not PREFIX_SEGMENT.fullmatch(segment)]
    if bad:
        return f"the path segment {bad[0]!r} must be lowercase letters, digits, '.', '_' and '-'"
    return name_problem(name)


def skill_uri(skill_path: str) -> str:
    """The URI of the skill's SKILL.md."""
    return file_uri(skill_path, MANIFEST)


def file_uri(skill_path: str, relative: str) -> str:
    """The URI of the file at ``relative`` (``/``-separated) in the skill at ``skill_path``:
    each segment of the file's path percent-encoded, so any file name is one path segment."""
    return f"{SCHEME}{skill_path}/" + "/".join(quote(segment, safe=_SAFE) for segment in relative.split("/"))


def directory_children(directory, files: Iterable) -> Optional[dict]:
    """The direct children of the directory resource ``directory`` among ``files`` ((uri, file)
    pairs of every file the caller may read), by URI: the files as given, "subdirectories listed
    as directory resources (mimeType: "inode/directory")". None when ``directory`` is no
    directory of theirs (a file, or nothing: -32602)."""
    if not isinstance(directory, str) or not directory.startswith(SCHEME):
        return None
    root = directory[:-1] if directory.endswith("/") and len(directory) > len(SCHEME) + 1 else directory
    if len(root) <= len(SCHEME) or "?" in root or "#" in root:
        return None
    children, under = {}, f"{root}/"
    for uri, file in files:
        if not uri.startswith(under):
            continue
        head, below, _ = uri[len(under):].partition("/")
        if not head:
            continue
        if below:
            children.setdefault(f"{under}{head}", {"uri": f"{under}{head}", "name": unquote(head),
                                                   "mimeType": DIRECTORY_MIME_TYPE})
        else:
            children[uri] = file
    return children or None

