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
    ("https://app.example/a b", False), ("https://app.example/a\x00b", False), ("https://app.example/a\x7fb", False),
    ("https://\u0430pp.example/cb", False), ("https://xn--pp-8kc.example/cb", True),
])
def test_redirect_uris(uri, allowed):
    assert redirect_uri_allowed(uri) is allowed


# -- client ID metadata documents: the same policy as registration --------------------------------

CIMD_ID = "https://client.example/mcp-client.json"


@pytest.fixture
def documents(monkeypatch):
    """What the toolkit's SSRF-hardened fetcher "downloads" (the network is not reached: a
    document would have to be served over https from a public address)."""
    from oauth2_provider.cimd import SafeMetadataFetcher

    served = {}
    monkeypatch.setattr(SafeMetadataFetcher, "fetch", lambda self, client_id: (served[client_id], 300))
    return served


@pytest.mark.parametrize("metadata", [
    {"redirect_uris": ["http://attacker.example/cb"]},
    {"redirect_uris": [f"https://client.example/cb{n}" for n in range(16)]},
    {"redirect_uris": ["https://user:pw@client.example/cb"]},
    {"redirect_uris": ["https://client.example/cb"], "grant_types": ["implicit"]},
])
def test_a_metadata_document_that_registration_would_refuse_makes_no_client(documents, metadata):
    from oauth2_provider.cimd import resolve_cimd_application

    client_id = f"{CIMD_ID}?{secrets.token_hex(4)}"
    documents[client_id] = {"client_id": client_id, "client_name": "doc", **metadata}
    assert resolve_cimd_application(client_id, None) is None
    assert not get_application_model().objects.filter(client_id=client_id).exists()


def test_a_metadata_document_within_the_policy_makes_a_public_client(documents):
    from oauth2_provider.cimd import resolve_cimd_application

    client_id = f"{CIMD_ID}?{secrets.token_hex(4)}"
    documents[client_id] = {"client_id": client_id, "client_name": "doc",
                            "redirect_uris": ["http://127.0.0.1:33418/callback"]}
    application = resolve_cimd_application(client_id, None)
    assert application is not None and application.client_type == "public"


def test_the_example_project_passes_the_metadata_document_check():
    from mcp_transport.checks import oauth_check

    assert oauth_check(None) == []
    with override_settings(OAUTH2_PROVIDER={**settings.OAUTH2_PROVIDER,
                                            "CIMD_METADATA_FETCHER": "oauth2_provider.cimd.SafeMetadataFetcher"}):
        assert [message.id for message in oauth_check(None)] == ["mcp_transport.W009"]
