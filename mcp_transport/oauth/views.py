"""The toolkit's authorization and registration views, with the MCP policy on top.

One policy (``check_client_metadata``) holds for every path that creates or changes a client:
registration (RFC 7591, ``ClientRegistrationView``), its update with the registration access
token (RFC 7592, ``ClientManagementView``), and a client ID metadata document fetched when an
https client_id first comes to /o/authorize/ (``PolicyMetadataFetcher``, the toolkit's
``CIMD_METADATA_FETCHER``)."""
import json
from datetime import timedelta
from ipaddress import ip_address
from urllib.parse import urlsplit

from django.core.cache import cache
from django.db.models import Exists, OuterRef, Q
from django.http import JsonResponse
from django.urls import reverse_lazy
from django.utils import timezone
from oauth2_provider import views as toolkit
from oauth2_provider.cimd import CIMDError, SafeMetadataFetcher
from oauth2_provider.models import get_application_model

from ..conf import get_config
from ..protocol import http

#: RFC 7591 grant types a public MCP client may register (refresh_token comes with the code).
PUBLIC_GRANT_TYPES = {"authorization_code", "refresh_token"}
MAX_REDIRECT_URIS = 10
MAX_REGISTRATION_BYTES = 16 * 1024


class AuthorizeView(toolkit.AuthorizationView):
    """The toolkit's authorization endpoint: an anonymous user goes to the app's login page
    first, then sees the consent page (the app's template) and approves or cancels."""

    template_name = "mcp_transport/oauth/authorize.html"
    login_url = reverse_lazy("oauth2_provider:login")


class MetadataView(toolkit.OAuthServerMetadataView):
    """The toolkit's RFC 8414 document, less the "none" client authentication at the
    introspection endpoint: it is for resource servers, which authenticate."""

    def get(self, request, *args, **kwargs):
        response = super().get(request, *args, **kwargs)
        metadata = json.loads(response.content)
        methods = metadata.get("introspection_endpoint_auth_methods_supported")
        if methods and "none" in methods:
            metadata["introspection_endpoint_auth_methods_supported"] = [m for m in methods if m != "none"]
            response = JsonResponse(metadata)
        return response


class RegistrationRefused(Exception):
    def __init__(self, error, description, status=400, headers=None):
        super().__init__(description)
        self.response = JsonResponse({"error": error, "error_description": description}, status=status)
        for name, value in (headers or {}).items():
            self.response[name] = value


class ClientRegistrationView(toolkit.DynamicClientRegistrationView):
    """RFC 7591 registration, open to anyone (an MCP client registers before any user signs
    in), for public clients only: "MCP clients MUST implement PKCE" and hold no secret.

    The toolkit's view creates the Application; before it runs, the request must pass the
    bounds (per address, then in total) and the metadata must be one of a public client with
    safe redirect URIs. A request for a confidential client is registered as a public one
    (token_endpoint_auth_method "none"): "the authorization server MAY reject or replace any of
    the client's requested metadata values" (RFC 7591 §3.2.1)."""

    def post(self, request, *args, **kwargs):
        try:
            data = public_client_metadata(request.body)
            admit(client_address(request))
        except RegistrationRefused as refused:
            return refused.response
        request._body = json.dumps(data).encode()
        return super().post(request, *args, **kwargs)


class ClientManagementView(toolkit.DynamicClientRegistrationManagementView):
    """RFC 7592's client configuration endpoint (read, update, delete with the registration
    access token). An update replaces the client's metadata, so it passes the registration's
    policy first: without it, a registered client could become what registration refuses (a
    plain-http redirect URI off loopback, a confidential client, another grant type)."""

    def put(self, request, *args, **kwargs):
        try:
            data = public_client_metadata(request.body)
        except RegistrationRefused as refused:
            return refused.response
        request._body = json.dumps(data).encode()
        return super().put(request, *args, **kwargs)


class PolicyMetadataFetcher(SafeMetadataFetcher):
    """The toolkit's SSRF-hardened fetcher of client ID metadata documents, refusing a document
    that registration would refuse (the toolkit itself accepts any redirect URI there). A
    refused document is a CIMDError: to the authorization request, an unknown client."""

    def fetch(self, client_id):
        metadata, max_age = super().fetch(client_id)
        try:
            check_client_metadata(metadata)
        except RegistrationRefused as refused:
            raise CIMDError(f"the client ID metadata document breaks the registration policy: {refused}") from None
        return metadata, max_age


def client_address(request) -> str:
    config = get_config()
    return http.client_address(request.META.get("REMOTE_ADDR", ""), request.headers.get("X-Forwarded-For"),
                               config["TRUSTED_PROXIES"])


def admit(address: str) -> None:
    """Room for one more registered client, or RegistrationRefused.

    ``OAUTH_REGISTRATIONS_PER_ADDRESS`` per ``OAUTH_REGISTRATION_WINDOW`` seconds from one client
    network (``http.network_of``: an IPv4 address, an IPv6 /64, since one host may take any
    address of its /64), then 429. At ``OAUTH_MAX_REGISTERED_CLIENTS``, the unused clients (no
    grant, no token) older than ``OAUTH_UNUSED_CLIENT_SECONDS`` go, then the oldest unused ones
    until there is room: before, a full table refused everyone (503) until a registration was a
    day old, and five addresses filled a table of 200. 503 only when every client was used."""
    config = get_config()
    window = config["OAUTH_REGISTRATION_WINDOW"]
    key = f"{config['KEY_PREFIX']}:oauth:registrations:{http.network_of(address)}"
    cache.add(key, 0, timeout=window)
    if cache.incr(key) > config["OAUTH_REGISTRATIONS_PER_ADDRESS"]:
        raise RegistrationRefused("temporarily_unavailable", "Too many registrations from this address; try later.",
                                  status=429, headers={"Retry-After": str(window)})
    Application = get_application_model()
    registered = Application.objects.filter(registration_source=Application.RegistrationSource.DCR)
    excess = registered.count() - config["OAUTH_MAX_REGISTERED_CLIENTS"] + 1
    if excess <= 0:
        return
    unused = registered.filter(_never_used(Application))
    cutoff = timezone.now() - timedelta(seconds=config["OAUTH_UNUSED_CLIENT_SECONDS"])
    excess -= unused.filter(created__lt=cutoff).delete()[1].get(Application._meta.label, 0)
    if excess > 0:
        oldest = list(unused.order_by("created", "pk").values_list("pk", flat=True)[:excess])
        excess -= Application.objects.filter(pk__in=oldest).delete()[1].get(Application._meta.label, 0)
    if excess > 0:
        raise RegistrationRefused("temporarily_unavailable", "No more clients can be registered now; try later.",
                                  status=503, headers={"Retry-After": "3600"})


def _never_used(Application) -> Q:
    """The client holds no authorization code, access token or refresh token: no user signed in
    with it (one signing in now has none yet either: evicted, its client registers again). The
    registration access token (RFC 7592) the toolkit issues with every client does not count."""
    from oauth2_provider.models import get_access_token_model, get_grant_model, get_refresh_token_model
    from oauth2_provider.settings import oauth2_settings

    for_client = OuterRef("pk")
    tokens = get_access_token_model().objects.filter(application=for_client).exclude(
        scope=oauth2_settings.DCR_REGISTRATION_SCOPE)
    return (~Exists(get_grant_model().objects.filter(application=for_client)) & ~Exists(tokens)
            & ~Exists(get_refresh_token_model().objects.filter(application=for_client)))


def public_client_metadata(body: bytes) -> dict:
    """The registration request as the toolkit should see it, or RegistrationRefused with the
    RFC 7591 §3.2.2 error ("invalid_redirect_uri", "invalid_client_metadata")."""
    if len(body) > MAX_REGISTRATION_BYTES:
        raise RegistrationRefused("invalid_client_metadata", f"The metadata is larger than {MAX_REGISTRATION_BYTES} bytes.")
    try:
        data = json.loads(body)
    except ValueError:
        raise RegistrationRefused("invalid_client_metadata", "The request body must be a JSON object.") from None
    if not isinstance(data, dict):
        raise RegistrationRefused("invalid_client_metadata", "The request body must be a JSON object.")
    grant_types = check_client_metadata(data)
    return {**data, "token_endpoint_auth_method": "none", "grant_types": grant_types}


def check_client_metadata(data: dict) -> list:
    """The policy of every client: a public client of the authorization code grant (with
    refresh_token) with safe redirect URIs. Returns its grant types; raises RegistrationRefused.
    (Whether it authenticates at the token endpoint is each path's: registration makes it
    "none", a metadata document must say "none" itself.)"""
    grant_types = data.get("grant_types", ["authorization_code"])
    # Items are compared, never hashed: [{}] is bad metadata, not a TypeError (a 500).
    if not isinstance(grant_types, list) or "authorization_code" not in grant_types or \
            not all(isinstance(grant, str) and grant in PUBLIC_GRANT_TYPES for grant in grant_types):
        raise RegistrationRefused("invalid_client_metadata",
                                  "grant_types must be authorization_code, optionally with refresh_token.")
    response_types = data.get("response_types", ["code"])
    if response_types != ["code"]:
        raise RegistrationRefused("invalid_client_metadata", "response_types must be [\"code\"].")
    # The toolkit would store str() of anything else (and null was a 500); the consent page shows it.
    if not isinstance(data.get("client_name", ""), str):
        raise RegistrationRefused("invalid_client_metadata", "client_name must be a string.")
    check_redirect_uris(data.get("redirect_uris"))
    return grant_types


def check_redirect_uris(uris) -> None:
    """https, or http on a loopback address for a native client (RFC 8252 §7.3); never a
    fragment ("The endpoint URI MUST NOT include a fragment component", RFC 6749 §3.1.2)."""
    if not isinstance(uris, list) or not uris:
        raise RegistrationRefused("invalid_redirect_uri", "redirect_uris must be a non-empty array of URLs.")
    if len(uris) > MAX_REDIRECT_URIS:
        raise RegistrationRefused("invalid_redirect_uri", f"At most {MAX_REDIRECT_URIS} redirect_uris.")
    for uri in uris:
        if not isinstance(uri, str) or not redirect_uri_allowed(uri):
            raise RegistrationRefused(
                "invalid_redirect_uri",
                f"Redirect URI {str(uri)[:200]!r} must be https, or http on 127.0.0.1, [::1] or localhost, "
                "with no fragment.")


def redirect_uri_allowed(uri: str) -> bool:
    # Printable ASCII only (RFC 3986: an IRI's other characters are percent-encoded, a host in
    # punycode): no controls (a NUL is a 500 on PostgreSQL), spaces, or look-alike hosts.
    if len(uri) > 2000 or not all("!" <= c <= "~" for c in uri):
        return False
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 (raises ValueError on a bad port)
    except ValueError:
        return False
    if parts.fragment or "#" in uri or not parts.hostname or parts.username or parts.password:
        return False
    if parts.scheme == "https":
        return True
    return parts.scheme == "http" and is_loopback_host(parts.hostname)


def is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ip_address(host).is_loopback
    except ValueError:
        return False
