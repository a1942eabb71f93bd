"""The settings module the live fixtures (mcp_transport/testing/pytest.py) write over a project's:
every test client is 127.0.0.1, so the per-caller rates are off unless the project sets them."""
import json
import sys

from mcp_transport.testing.pytest import SETTINGS_TEMPLATE


def written(tmp_path, monkeypatch, base_text, overrides=None) -> dict:
    (tmp_path / "base_settings.py").write_text(base_text)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "base_settings", raising=False)
    namespace = {}
    exec(SETTINGS_TEMPLATE.format(base="base_settings", overrides=json.dumps(overrides or {}), prefix="mcptestx"),
         namespace)
    return namespace["MCP_TRANSPORT"]


def test_the_rates_are_off_unless_the_project_sets_them(tmp_path, monkeypatch):
    assert written(tmp_path, monkeypatch, 'MCP_TRANSPORT = {"AUTH": True}\n') == {
        "REQUEST_RATE_LIMIT": None, "SESSION_OPEN_RATE": None, "AUTH": True, "KEY_PREFIX": "mcptestx"}
    own = written(tmp_path, monkeypatch, 'MCP_TRANSPORT = {"SESSION_OPEN_RATE": "5/m"}\n')
    assert own["SESSION_OPEN_RATE"] == "5/m" and own["REQUEST_RATE_LIMIT"] is None
