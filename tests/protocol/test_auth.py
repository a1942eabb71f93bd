"""protocol.auth: bearer tokens, challenges, metadata URLs and durations (no I/O)."""
import pytest

from mcp_transport.protocol import auth


@pytest.mark.parametrize("header, token", [
    ("Bearer abc.DEF-ghi_~+/=", "abc.DEF-ghi_~+/="), ("bearer tok", "tok"), ("BEARER  tok ", "tok"),
    (None, None), ("", None), ("Bearer", None), ("Bearer ", None), ("Basic dXNlcjpwdw==", None),
    ("Bearer two tokens", None), ("Bearer tok\x00", None), ("Bearer t\"ok", None), ("Bearertok", None),
])
def test_bearer_token(header, token):
    assert auth.bearer_token(header) == token


@pytest.mark.parametrize("resource, url", [
    ("https://host/mcp", "https://host/.well-known/oauth-protected-resource/mcp"),
    ("https://host:8443/a/mcp/", "https://host:8443/.well-known/oauth-protected-resource/a/mcp"),
    ("https://host", "https://host/.well-known/oauth-protected-resource"),
])
def test_metadata_url_is_rfc9728_section_3_1(resource, url):
    assert auth.metadata_url(resource) == url


def test_challenges():
    assert auth.challenge("https://h/mcp", ["mcp"]) == \
        'Bearer scope="mcp", resource_metadata="https://h/.well-known/oauth-protected-resource/mcp"'
    assert auth.challenge("https://h/mcp", ["mcp", "reports"], "insufficient_scope") == (
        'Bearer error="insufficient_scope", scope="mcp reports", '
        'resource_metadata="https://h/.well-known/oauth-protected-resource/mcp"')
    quoted = auth.challenge("https://h/mcp", [], "invalid_token", 'a "quoted" \\ text')
    assert 'error_description="a \\"quoted\\" \\\\ text"' in quoted and "scope=" not in quoted


def test_metadata_document():
    assert auth.protected_resource_metadata("https://h/mcp", ["https://as"], ("mcp",)) == {
        "resource": "https://h/mcp", "authorization_servers": ["https://as"], "scopes_supported": ["mcp"],
        "bearer_methods_supported": ["header"]}


@pytest.mark.parametrize("text, seconds", [("90s", 90), ("15m", 900), ("12h", 43200), ("30d", 2592000),
                                           ("2w", 1209600), (" 1h ", 3600)])
def test_durations(text, seconds):
    assert auth.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0s", "10", "1y", "-1d", "1.5h", "h"])
def test_bad_durations(text):
    with pytest.raises(ValueError):
        auth.parse_duration(text)


def test_scopes():
    assert auth.parse_scopes("mcp  reports") == {"mcp", "reports"}
    assert auth.parse_scopes(["mcp"]) == {"mcp"}
    assert auth.parse_scopes(None) == frozenset()
