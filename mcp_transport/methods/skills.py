"""The skills extension's methods (``io.modelcontextprotocol/skills``, SEP-2640), in both eras:
``skills/list``, ``skills/get`` and ``resources/directory/read`` over the skills of
skill_catalog.py. A caller lists, gets and reads only the skills it may use (auth.may_use, as
for tools): to anyone else a skill does not exist. Their files are read with resources/read."""
from ..auth import may_use
from ..protocol import skills as wire
from ..protocol.errors import InvalidParams
from . import extensions
from .listing import paginate, usable
from .method_table import METHODS
from .params import string_param
from .registry import registry

# SEP-2640: "servers declare support for this extension" (SEP-2133's extensions map);
# "directoryRead: The server implements resources/directory/read".
extensions.declare(wire.EXTENSION, lambda: {"directoryRead": True} if registry.skills else None)


@METHODS.method("skills/list", capability="skills")
async def skills_list(params, call):
    """Whole entries, PAGE_SIZE a page: "An entry is atomic — a skill's resources set is never
    split across pages"."""
    return paginate(usable(registry.skills, call), params, "skills")


@METHODS.method("skills/get", capability="skills")
async def skills_get(params, call):
    uri = string_param(params, "uri")
    spec = registry.skills.get(uri)
    if spec is None or not may_use(spec, call.principal):
        # "If the URI does not identify a skill the server serves, the server MUST return error
        # -32602 (Invalid params)".
        raise InvalidParams(f"No skill of this server has the URI {uri}.", data={"uri": uri})
    return {"skill": spec.describe()}


@METHODS.method("resources/directory/read", capability="skills")
async def resources_directory_read(params, call):
    """"The result contains every direct child of the directory", in pages as resources/list's;
    "If the URI does not exist, or exists but is not a directory resource, the server MUST return
    error -32602"."""
    uri = string_param(params, "uri")
    files = ((file.uri, file) for spec in usable(registry.skills, call).values() for file in spec.files.values())
    children = wire.directory_children(uri, files)
    if children is None:
        raise InvalidParams(f"{uri} is not a directory of this server's skills.", data={"uri": uri})
    return paginate(children, params, "resources", describe=_child)


def _child(child) -> dict:
    """A subdirectory's resource as it is; a file's: "files with their ordinary resource metadata"."""
    if isinstance(child, dict):
        return child
    return {"uri": child.uri, "name": child.path.rpartition("/")[2], "mimeType": child.mime_type, "size": child.size}
