"""auth: who may use a spec, the principal's cache form, and the validators' option checks."""
import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import override_settings

from mcp_transport.auth import Principal, may_use, missing_scopes
from mcp_transport.methods.registry import Registry


class FakeUser:
    is_authenticated = True
    pk = 7

    def __init__(self, perms=()):
        self.perms = set(perms)

    def has_perm(self, perm):
        return perm in self.perms


def specs():
    registry = Registry()
    registry.tool(lambda: "x", name="open")
    registry.tool(lambda: "x", name="scoped", scopes=["reports"])
    registry.tool(lambda: "x", name="guarded", permission="app.view_thing")
    return registry.tools


AUTH_ON = {"AUTH": True}


def test_scopes_apply_only_with_auth_on():
    tools, principal = specs(), Principal.for_user(FakeUser(), scopes=frozenset({"mcp"}))
    with override_settings(MCP_TRANSPORT=AUTH_ON):
        assert missing_scopes(tools["scoped"], principal) == ["reports"]
        assert not may_use(tools["scoped"], principal)
        assert may_use(tools["scoped"], Principal.for_user(FakeUser(), scopes=frozenset({"mcp", "reports"})))
        assert not may_use(tools["scoped"], None)
    with override_settings(MCP_TRANSPORT={}):
        assert may_use(tools["scoped"], principal)


def test_permissions_are_the_users():
    tools = specs()
    assert not may_use(tools["guarded"], Principal.for_user(FakeUser()))
    assert may_use(tools["guarded"], Principal.for_user(FakeUser({"app.view_thing"})))
    assert not may_use(tools["guarded"], Principal(user=AnonymousUser()))
    assert not may_use(tools["guarded"], None)
    assert may_use(tools["open"], None)


def test_a_specs_own_visibility_check_hides_it_and_never_asks_for_scopes():
    """``visible(principal)`` (the model toolsets' has_permission) rules beside ``permission``;
    a caller it hides gets no 403 naming the spec's scopes: to it the spec does not exist."""
    from mcp_transport.auth import require_spec_scopes

    tools = specs()
    tools["scoped"].visible = lambda principal: principal is not None and principal.user_id == 7
    assert may_use(tools["scoped"], Principal.for_user(FakeUser()))
    stranger = Principal(key="user:8", user_id=8, user=FakeUser())
    assert not may_use(tools["scoped"], stranger) and not may_use(tools["scoped"], None)
    with override_settings(MCP_TRANSPORT=AUTH_ON):
        require_spec_scopes(tools["scoped"], stranger, {"path": "/mcp"}, {"host": "h"})  # no 403
        with pytest.raises(Exception) as step_up:
            require_spec_scopes(tools["scoped"], Principal.for_user(FakeUser()), {"path": "/mcp"}, {"host": "h"})
    assert step_up.value.http_status == 403


@pytest.mark.parametrize("options", [{"permission": "nodot"}, {"permission": 3}, {"scopes": "mcp"},
                                     {"scopes": ["two words"]}, {"scopes": [""]}])
def test_bad_access_options_are_refused_at_registration(options):
    with pytest.raises(ValueError):
        Registry().tool(lambda: "x", name="t", **options)


def test_principal_round_trips_without_its_user():
    principal = Principal.for_user(FakeUser(), scopes=frozenset({"b", "a"}), expires_at=10.5, source="static",
                                   revocable=True, resource="https://h/mcp")
    again = Principal.from_json(principal.to_json())
    assert again == principal and again.user is None
    assert '"scopes":["a","b"]' in principal.to_json()
    assert again.usable("https://h/mcp", 10.0) and not again.usable("https://h/mcp", 10.5)
    assert not again.usable("https://other/mcp", 1.0)


def test_the_endpoints_url_follows_a_tls_proxy_as_django_does():
    """resource_url (the 401's resource, the tokens' audience, the Server Card's remote) says
    https behind a proxy that ends TLS, as the metadata view's request.scheme does."""
    from mcp_transport.auth import resource_url

    scope = {"scheme": "http", "path": "/mcp", "headers": [(b"x-forwarded-proto", b"https")]}
    with override_settings(MCP_TRANSPORT={}):
        assert resource_url(scope, "mcp.example.com") == "http://mcp.example.com/mcp"  # no proxy declared
        with override_settings(SECURE_PROXY_SSL_HEADER=("HTTP_X_FORWARDED_PROTO", "https")):
            assert resource_url(scope, "mcp.example.com") == "https://mcp.example.com/mcp"
            assert resource_url({**scope, "headers": [(b"x-forwarded-proto", b"http")]}, "h") == "http://h/mcp"
            assert resource_url({**scope, "headers": []}, "h", "/other") == "http://h/other"
            assert resource_url({**scope, "scheme": "https", "headers": []}, "h") == "https://h/mcp"
    with override_settings(MCP_TRANSPORT={"AUTH_RESOURCE": "https://api.example.com/tools/mcp"}):
        assert resource_url(scope, "mcp.example.com") == "https://api.example.com/tools/mcp"
