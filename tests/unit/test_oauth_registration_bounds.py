"""mcp_transport.oauth's bound on registered clients in all: when full, registrations never used
for OAUTH_UNUSED_CLIENT_SECONDS are pruned first; if it is still full the next one is refused."""
import secrets
from datetime import timedelta

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import timezone
from oauth2_provider.models import get_application_model

from mcp_transport.oauth.views import RegistrationRefused, admit, redirect_uri_allowed

pytestmark = pytest.mark.django_db


def bounded(**values):
    return override_settings(MCP_TRANSPORT={**settings.MCP_TRANSPORT, "OAUTH_REGISTRATIONS_PER_ADDRESS": 1000,
                                            "KEY_PREFIX": f"oauthtest{secrets.token_hex(3)}", **values})


def dcr_client(age_seconds=0):
    Application = get_application_model()
    app = Application.objects.create(name="c", client_type="public", authorization_grant_type="authorization-code",
                                     redirect_uris="https://a.example/cb",
                                     registration_source=Application.RegistrationSource.DCR)
    Application.objects.filter(pk=app.pk).update(created=timezone.now() - timedelta(seconds=age_seconds))
    return app


def test_a_full_table_prunes_unused_old_registrations_then_refuses():
    Application = get_application_model()
    with bounded(OAUTH_MAX_REGISTERED_CLIENTS=2, OAUTH_UNUSED_CLIENT_SECONDS=3600):
        old, recent = dcr_client(age_seconds=7200), dcr_client()
        admit("192.0.2.1")  # full: the old unused one goes, so this one may register
        assert not Application.objects.filter(pk=old.pk).exists()
        assert Application.objects.filter(pk=recent.pk).exists()
        dcr_client()
        with pytest.raises(RegistrationRefused) as refused:
            admit("192.0.2.2")  # full of recent ones: nothing to prune
        assert refused.value.response.status_code == 503


def test_the_per_address_count():
    with bounded(OAUTH_REGISTRATIONS_PER_ADDRESS=2):
        admit("192.0.2.3")
        admit("192.0.2.3")
        with pytest.raises(RegistrationRefused) as refused:
            admit("192.0.2.3")
        assert refused.value.response.status_code == 429
        admit("192.0.2.4")


@pytest.mark.parametrize("uri, allowed", [
    ("https://app.example/cb", True), ("http://127.0.0.1:3000/callback", True), ("http://[::1]/cb", True),
    ("http://localhost:8/cb", True), ("http://127.1.2.3/cb", True), ("http://example.com/cb", False),
    ("https://app.example/cb#x", False), ("https://app.example/cb#", False), ("cursor://callback", False),
    ("https://u:p@app.example/cb", False), ("https://app.example:99999/cb", False), ("https:///cb", False),
    ("https://app.example/a b", False),
])
def test_redirect_uris(uri, allowed):
    assert redirect_uri_allowed(uri) is allowed
