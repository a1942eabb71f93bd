"""docs/apps.md: its code is the example project's, its example CSP registers and validates
against ext-apps' schema, its error texts are the ones given, and what it says a host reads is
what a client of a live daphne reads."""
import json
import re

import pytest
from django.contrib.auth.models import AnonymousUser

from mcp_transport import app
from mcp_transport.methods import apps, registry as registry_module
from mcp_transport.protocol import apps as wire
from mcp_transport.protocol.errors import ProtocolError

from .test_apps import CARD, client, people  # noqa: F401 (the fixture)
from .test_apps_hosts import validator
from .test_skills import ROOT


def doc() -> str:
    return (ROOT / "docs" / "apps.md").read_text()


def blocks(language: str) -> list:
    return re.findall(rf"```{language}\n(.*?)```", doc(), re.S)


@pytest.fixture
def registry(monkeypatch):
    reg = registry_module.registry
    monkeypatch.setattr(reg, "tools", dict(reg.tools))
    monkeypatch.setattr(reg, "resources", dict(reg.resources))
    return reg


def test_the_pages_code_is_the_example_projects():
    excerpts = [block for block in blocks("python") if block.startswith("# tools/library/mcp_apps.py (excerpt)\n")]
    source = (ROOT / "tools" / "library" / "mcp_apps.py").read_text()
    assert len(excerpts) == 2 and all(block.split("\n", 1)[1] in source for block in excerpts)
    (template,) = blocks("django")
    name, _, body = template.partition("\n")
    assert name == "{# tools/library/templates/library/apps/book_card.html #}"
    assert (ROOT / "tools" / "library" / "templates" / "library" / "apps" / "book_card.html").read_text() == body
    (script,) = blocks("javascript")
    assert script.split("\n", 1)[1] in (ROOT / "tools" / "library" / "static" / "library" / "apps" / "book_card.js").read_text()


def test_the_pages_csp_example_registers_and_validates(registry):
    (example,) = [block for block in blocks("python") if block.startswith('app("ui://maps/route"')]
    exec(example, {"app": app})  # noqa: S102 (the page's own code)
    spec = apps.apps()["ui://maps/route"]
    assert wire.resource_meta_errors(spec.ui) == []
    validator("McpUiResourceMeta").validate(spec.ui)


def test_the_pages_errors_are_the_ones_given(registry):
    (shown,) = blocks("text")
    registry.tool(ui="ui://library/book-crad", name="book_card")(lambda: None)
    assert shown.strip() in apps.problems()
    spec = apps.apps()[CARD]
    broken = apps.AppSpec(uri=CARD, func=None, name="x", template="no/such.html")
    with pytest.raises(ProtocolError) as raised:
        apps.render(broken, AnonymousUser())
    assert f"`{raised.value}`" in doc().replace("\n", " ") and spec.template != broken.template


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_what_a_host_reads_is_what_the_page_shows(auth_server, people, version):  # noqa: F811
    ask = client(auth_server, people["viewer"], version)
    answer, listed = json.loads(blocks("json")[0]), json.loads(blocks("json")[1])
    read = ask("resources/read", {"uri": CARD})["result"]
    shown_text = answer["contents"][0].pop("text")
    text = read["contents"][0].pop("text")
    assert {"contents": read["contents"]} == answer
    head, _, tail = shown_text.partition("…")
    assert text.startswith(head) and text.endswith(tail)
    tools = {tool["name"]: tool for tool in ask("tools/list")["result"]["tools"]}
    assert tools["book_card"]["_meta"] == listed
