"""mcp_transport.oauth's bounds on dynamic client registration: per client network (an IPv4
address, an IPv6 /64) and in all, where a full table evicts its oldest unused clients (those
unused for OAUTH_UNUSED_CLIENT_SECONDS first), and refuses only when every client was used."""
import json
import secrets
from datetime import timedelta

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_application_model
from oauth2_provider.settings import oauth2_settings

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
    # As the toolkit's registration does: the RFC 7592 registration access token (no sign of use).
    get_access_token_model().objects.create(application=app, token=secrets.token_urlsafe(20),
                                            scope=oauth2_settings.DCR_REGISTRATION_SCOPE,
                                            expires=timezone.now() + timedelta(days=3650))
    return app


def used(app):
    """The client got a token (its user signed in): it is never evicted."""
    get_access_token_model().objects.create(application=app, token=secrets.token_urlsafe(20), scope="mcp",
                                            expires=timezone.now() + timedelta(hours=1))
    return app


def test_a_full_table_evicts_the_oldest_unused_clients_instead_of_refusing():
    """Issue 38: a full table refused everyone (503) until a registration was a day old."""
    Application = get_application_model()
    with bounded(OAUTH_MAX_REGISTERED_CLIENTS=3, OAUTH_UNUSED_CLIENT_SECONDS=3600):
        stale, kept, older, recent = dcr_client(7200), used(dcr_client(600)), dcr_client(60), dcr_client(30)
        admit("192.0.2.1")  # full: the unused one older than an hour goes, and the oldest unused
        assert not Application.objects.filter(pk__in=[stale.pk, older.pk]).exists()
        assert set(Application.objects.filter(pk__in=[kept.pk, recent.pk]).values_list("pk", flat=True)) == \
            {kept.pk, recent.pk}
        dcr_client()
        admit("192.0.2.2")  # full of recent clients: the oldest unused goes, never the used one
        assert not Application.objects.filter(pk=recent.pk).exists()
        assert Application.objects.filter(pk=kept.pk).exists()


def register(address):
    """A registration through the app's endpoint (the toolkit's view, as a client makes it)."""
    from django.contrib.auth.models import AnonymousUser
    from django.test import RequestFactory

    from mcp_transport.oauth.views import ClientRegistrationView

    request = RequestFactory().post("/o/register/", data=json.dumps({"redirect_uris": ["http://127.0.0.1:9/cb"]}),
                                    content_type="application/json", REMOTE_ADDR=address)
    request.user = AnonymousUser()
    return ClientRegistrationView.as_view()(request).status_code


def test_five_addresses_no_longer_fill_the_table_for_everyone():
    """Issue 38: 5 addresses filled a table of 200, and a new client got 503 for a day."""
    with bounded(OAUTH_MAX_REGISTERED_CLIENTS=10, OAUTH_REGISTRATIONS_PER_ADDRESS=2):
        assert [register(f"198.51.100.{n % 5}") for n in range(10)] == [201] * 10
        assert register("203.0.113.7") == 201


def test_a_table_full_of_used_clients_refuses():
    with bounded(OAUTH_MAX_REGISTERED_CLIENTS=2):
        used(dcr_client()), used(dcr_client())
        with pytest.raises(RegistrationRefused) as refused:
            admit("192.0.2.5")
        assert refused.value.response.status_code == 503


def test_the_per_address_count():
    with bounded(OAUTH_REGISTRATIONS_PER_ADDRESS=2):
        admit("192.0.2.3")
        admit("192.0.2.3")
        with pytest.raises(RegistrationRefused) as refused:
            admit("192.0.2.3")
        assert refused.value.response.status_code == 429
        admit("192.0.2.4")


def test_an_ipv6_client_counts_by_its_64():
    """One host may take any of its /64's addresses: they count as one."""
    with bounded(OAUTH_REGISTRATIONS_PER_ADDRESS=2):
        admit("2001:db8:1:2::1")
        admit("2001:db8:1:2:ffff::7")
        with pytest.raises(RegistrationRefused) as refused:
            admit(f"2001:db8:1:2:{secrets.token_hex(2)}::9")
        assert refused.value.response.status_code == 429
        admit("2001:db8:1:3::1")  # the next /64 is another network


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
