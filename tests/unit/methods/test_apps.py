"""MCP Apps (methods/apps.py, protocol/apps.py) in this process: the shapes of _meta.ui, what
the system checks refuse, a view that fails to render, and what a client's capabilities say."""
import logging

import pytest
from django.contrib.auth.models import AnonymousUser

from mcp_transport.checks import apps_check
from mcp_transport.methods import apps, registry as registry_module
from mcp_transport.methods.context import Context
from mcp_transport.protocol import apps as wire
from mcp_transport.protocol.errors import ProtocolError
from mcp_transport.protocol.extensions import client_settings


@pytest.fixture
def registry(monkeypatch):
    """The registry's tools and resources, restored after the test."""
    reg = registry_module.registry
    monkeypatch.setattr(reg, "tools", dict(reg.tools))
    monkeypatch.setattr(reg, "resources", dict(reg.resources))
    return reg


def test_a_tool_names_its_view_by_a_ui_uri_with_a_known_visibility():
    assert wire.with_tool_meta({"x": 1}, "ui://a/b") == {"x": 1, "ui": {"resourceUri": "ui://a/b"}}
    assert wire.with_tool_meta(None, {"resourceUri": "ui://a/b", "visibility": ["app"]}) == {
        "ui": {"resourceUri": "ui://a/b", "visibility": ["app"]}}
    for bad in ("https://a/b", "ui://", {"resourceUri": "ui://a", "visibility": ["user"]},
                {"resourceUri": "ui://a", "visibility": []}, {"resourceUri": "ui://a", "hidden": True}):
        with pytest.raises(ValueError):
            wire.with_tool_meta(None, bad)


def test_a_tool_is_the_models_unless_its_visibility_leaves_the_model_out():
    assert wire.for_the_model(None) and wire.for_the_model({"x": 1})
    assert wire.for_the_model(wire.with_tool_meta(None, "ui://a/b"))
    assert wire.for_the_model(wire.with_tool_meta(None, {"resourceUri": "ui://a", "visibility": ["model"]}))
    assert not wire.for_the_model(wire.with_tool_meta(None, {"resourceUri": "ui://a", "visibility": ["app"]}))


def test_malformed_resource_meta_is_named():
    assert wire.resource_meta_errors({"csp": {"connectDomains": ["https://api.example.com", "wss://*.example.com"]},
                                      "permissions": {"camera": {}}, "domain": "x.example", "prefersBorder": False}) == []
    errors = wire.resource_meta_errors({"csp": {"connectDomain": [], "resourceDomains": "https://cdn.example.com",
                                                "frameDomains": ["https://x.example/path"]},
                                        "permissions": {"usb": {}}, "prefersBorder": "yes"})
    assert len(errors) == 5, errors


def test_the_checks_refuse_missing_files_unknown_views_and_a_malformed_csp(registry):
    assert apps_check(None) == []  # the example project's views
    apps.app("ui://test/broken", template="no/such/template.html", static=["no/such/file.js"],
             csp={"connectDomains": ["api.example.com"]})
    registry.tool(ui="ui://test/nowhere")(lambda: None)
    messages = [message.msg for message in apps_check(None)]
    assert messages == [
        "The view ui://test/broken names the template 'no/such/template.html', which no template loader finds.",
        "The view ui://test/broken names the static file 'no/such/file.js', which no static files finder finds.",
        "The view ui://test/broken's _meta.ui: csp connectDomains must be a list of origins such as "
        "\"https://api.example.com\".",
        "The tool <lambda> names the view ui://test/nowhere, which no app() registers."]
    assert {message.id for message in apps_check(None)} == {"mcp_transport.E013"}


def test_a_view_that_fails_to_render_is_logged_and_answered_without_its_traceback(registry, caplog):
    spec = apps.app("ui://test/broken", template="no/such/template.html")
    with caplog.at_level(logging.ERROR, logger="mcp_transport.methods.apps"), pytest.raises(ProtocolError) as raised:
        apps.render(spec, AnonymousUser())
    assert (raised.value.code, str(raised.value)) == (
        -32603, "The view ui://test/broken could not be rendered; the server's log says why.")
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    assert "TemplateDoesNotExist" in caplog.text


def test_a_closing_tag_in_a_static_file_cannot_end_its_element():
    assert apps._escape_end("a</SCRIPT>b</script", "</script") == "a<\\/SCRIPT>b<\\/script"


def test_a_tool_reads_the_extensions_its_client_declared():
    declared = {"extensions": {wire.EXTENSION: {"mimeTypes": [wire.MIME_TYPE]}, "example.com/x": {}}}
    ctx = Context(channel=None, session_id="s", request_id=1, client_capabilities=declared)
    assert ctx.client_supports_apps and ctx.client_extension("example.com/x") == {}
    assert ctx.client_extension("example.com/y") is None
    # "mimeTypes: Array of supported content types (REQUIRED)": without ours, no apps.
    other = Context(channel=None, session_id="s", request_id=1,
                    client_capabilities={"extensions": {wire.EXTENSION: {"mimeTypes": ["text/uri-list"]}}})
    assert not other.client_supports_apps and not Context(channel=None, session_id="s", request_id=1).client_supports_apps
    assert client_settings({"extensions": {"a": True}}, "a") is None  # not a settings object


@pytest.mark.parametrize("version, scope", [("2026-07-28", "private"), ("2025-11-25", None)])
async def test_a_view_is_private_to_caches_whatever_cache_hints_say(settings, version, scope):
    """An operator's CACHE_HINTS may make resources/read "public"; a view is rendered for its user."""
    from mcp_transport.eras.modern_2026.methods import cache_hint
    from mcp_transport.methods.dispatch import Call
    from mcp_transport.methods.resources_prompts import resources_read
    from mcp_transport.protocol import modern
    from mcp_transport.state.sessions import SessionRecord

    settings.MCP_TRANSPORT = {**settings.MCP_TRANSPORT, "CACHE_HINTS": {"resources/read": {"cacheScope": "public"}}}
    call = Call(session=SessionRecord(id="x" * 32, protocol_version=version), user=AnonymousUser(),
                channel=type("Channel", (), {"request_id": 1})())
    call.owner = "test"
    spec = apps.apps()["ui://library/book-card"]
    visible, spec.visible = spec.visible, (lambda principal: True)  # the anonymous caller may read it
    try:
        result = await resources_read({"uri": "ui://library/book-card"}, call)
    finally:
        spec.visible = visible
    assert result.get("cacheScope") == scope
    if version == "2026-07-28":
        assert modern.stamp(result, {}, cache_hint("resources/read"))["cacheScope"] == "private"
        assert cache_hint("resources/read")[1] == "public"  # what any other resource gets


def test_the_protocol_pages_extension_example_declares_in_both_eras(monkeypatch):
    """docs/protocol.md's "Extensions, one mechanism", as printed."""
    import re
    from pathlib import Path

    from mcp_transport.eras.modern_2026 import methods as modern_methods
    from mcp_transport.methods import extensions, method_table

    page = (Path(__file__).resolve().parents[3] / "docs" / "protocol.md").read_text()
    example = re.search(r"yours too: `(extensions\.declare\(.*?\))`", page).group(1)
    monkeypatch.setattr(extensions, "DECLARED", dict(extensions.DECLARED))
    exec(example, {"extensions": extensions})  # noqa: S102 (the page's own code)
    assert method_table.capabilities()["extensions"]["com.example/thing"] == {"v": 1}
    assert modern_methods.capabilities()["extensions"]["com.example/thing"] == {"v": 1}
    ctx = Context(channel=None, session_id="s", request_id=1,
                  client_capabilities={"extensions": {"com.example/thing": {"v": 2}}})
    assert ctx.client_extension("com.example/thing") == {"v": 2}
