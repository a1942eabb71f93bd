"""checks: the system checks on MCP_TRANSPORT."""
import pytest
from django.core import checks
from django.test import override_settings

from mcp_transport.checks import settings_check


def ours(messages):
    return [m for m in messages if m.id and m.id.startswith("mcp_transport.")]


def test_defaults_pass():
    with override_settings(MCP_TRANSPORT={}, DEBUG=False):
        assert settings_check(None) == []


def test_project_settings_pass():
    assert settings_check(None) == []
    assert ours(checks.run_checks()) == []


def test_unknown_key_is_e001():
    with override_settings(MCP_TRANSPORT={"ALLOWED_ORIGIN": ["https://a.example"]}):
        messages = settings_check(None)
    assert len(messages) == 1
    (error,) = messages
    assert isinstance(error, checks.Error)
    assert error.id == "mcp_transport.E001"
    assert error.level == checks.ERROR
    assert "ALLOWED_ORIGIN" in error.msg
    assert error.hint


def test_unknown_key_through_run_checks():
    with override_settings(MCP_TRANSPORT={"BOGUS": 1}):
        messages = ours(checks.run_checks())
    assert [m.id for m in messages] == ["mcp_transport.E001"]
    assert messages[0].is_serious()


def test_unknown_key_check_is_in_compatibility_tag():
    with override_settings(MCP_TRANSPORT={"BOGUS": 1}):
        assert [m.id for m in ours(checks.run_checks(tags=[checks.Tags.compatibility]))] == ["mcp_transport.E001"]
        assert ours(checks.run_checks(tags=[checks.Tags.security])) == []


NO_ORIGIN = {"ALLOWED_ORIGINS": [], "ALLOW_LOOPBACK_ORIGINS": False}


def test_no_origin_at_all_is_w001():
    with override_settings(DEBUG=False, MCP_TRANSPORT=NO_ORIGIN):
        messages = settings_check(None)
        assert [m.id for m in ours(checks.run_checks())] == ["mcp_transport.W001"]
    (warning,) = messages
    assert isinstance(warning, checks.Warning)
    assert warning.id == "mcp_transport.W001"
    assert warning.level == checks.WARNING
    assert not warning.is_serious()
    assert "ALLOWED_ORIGINS" in warning.hint


@pytest.mark.parametrize("debug, mcp", [
    (True, NO_ORIGIN),
    (False, {**NO_ORIGIN, "ALLOWED_ORIGINS": ["https://app.example"]}),
    (False, {**NO_ORIGIN, "ALLOW_LOOPBACK_ORIGINS": True}),
    (False, {"ALLOWED_ORIGINS": []}),
])
def test_no_warning_when_some_origin_can_call(debug, mcp):
    with override_settings(DEBUG=debug, MCP_TRANSPORT=mcp):
        assert settings_check(None) == []


def test_error_wins_over_warning():
    with override_settings(DEBUG=False, MCP_TRANSPORT={**NO_ORIGIN, "BOGUS": 1}):
        assert [m.id for m in settings_check(None)] == ["mcp_transport.E001"]
