"""MCP Apps as hosts find them: the TypeScript SDK client with ext-apps' host helpers
(js/ts_apps.mjs) finds each tool's view and reads it, in both eras; every ``_meta.ui`` a tool or
a view carries validates against the JSON schema ext-apps ships (dist/src/generated/schema.json)."""
import json
from pathlib import Path

import jsonschema
import pytest

from .test_apps import CARD, EDITOR, MIME, client, people  # noqa: F401 (the fixture)
from .test_skills import ERAS, ROOT, node

SCRIPT = Path(__file__).with_name("js") / "ts_apps.mjs"
SCHEMA = ROOT / "node_modules" / "@modelcontextprotocol" / "ext-apps" / "dist" / "src" / "generated" / "schema.json"


def validator(definition: str):
    schema = json.loads(SCHEMA.read_text())
    return jsonschema.Draft202012Validator({"$ref": f"#/$defs/{definition}", "$defs": schema["$defs"]})


@pytest.mark.parametrize("mode, version", ERAS)
def test_the_typescript_host_helpers_find_and_read_every_view(auth_server, people, mode, version):  # noqa: F811
    seen = json.loads(node(auth_server.url, mode, people["editor"], str(people["book"]),
                           script=SCRIPT).strip().splitlines()[-1])
    assert seen["version"] == version and seen["extension"] == {"mimeTypes": [MIME]}
    assert {name: tool["uri"] for name, tool in seen["tools"].items()} == {
        "book_card": CARD, "book_editor": EDITOR, "book_retitle": EDITOR}
    assert sorted(seen["views"]) == [CARD, EDITOR]
    for view in seen["views"].values():
        assert view["isAppMime"] and view["doctype"] == "<!DOCTYPE html>" and view["meta"] == {"prefersBorder": True}
        assert view["cacheScope"] == ("private" if version == "2026-07-28" else None)
    assert [entry["uri"] for entry in seen["listed"]] == [CARD, EDITOR]
    # The tool saw the client's declaration (ctx.client_supports_apps), in either era.
    assert seen["card"]["text"].startswith("Shown in the book card: ")
    assert seen["card"]["structuredContent"]["id"] == people["book"]


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_every_meta_ui_validates_against_the_ext_apps_schema(auth_server, people, version):  # noqa: F811
    ask = client(auth_server, people["editor"], version)
    tool_metas = [tool["_meta"]["ui"] for tool in ask("tools/list")["result"]["tools"] if "ui" in tool.get("_meta", {})]
    listed = [entry["_meta"]["ui"] for entry in ask("resources/list")["result"]["resources"]
              if entry["uri"].startswith("ui://")]
    read = [item["_meta"]["ui"] for uri in (CARD, EDITOR) for item in ask("resources/read", {"uri": uri})["result"]["contents"]]
    assert len(tool_metas) == 3 and len(listed) == len(read) == 2
    for meta in tool_metas:
        validator("McpUiToolMeta").validate(meta)
    for meta in listed + read:
        validator("McpUiResourceMeta").validate(meta)


def test_the_schema_check_can_fail():
    """What the schema refuses (so the validation above means something)."""
    with pytest.raises(jsonschema.ValidationError):
        validator("McpUiToolMeta").validate({"resourceUri": CARD, "visibility": ["user"]})
    with pytest.raises(jsonschema.ValidationError):
        validator("McpUiResourceMeta").validate({"csp": {"connectDomain": []}})
