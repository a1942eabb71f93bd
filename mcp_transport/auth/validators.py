"""The token validators (``MCP_TRANSPORT["AUTH_VALIDATORS"]``), one per kind of token.

- ``StaticTokenValidator``: the app's own tokens for machine clients (``McpToken``).
- ``OAuthToolkitValidator``: access tokens of django-oauth-toolkit in the same project (a
  database read, no HTTP round trip).
- ``JwtValidator``: JWT access tokens of an external authorization server, checked with PyJWT
  against its JWKS (signature, issuer, audience, expiry; keys cached and refetched when a token
  names an unknown key id).
- ``IntrospectionValidator``: opaque tokens of an external authorization server, asked about
  at its RFC 7662 introspection endpoint.

"MCP servers MUST validate that access tokens were issued specifically for them as the intended
audience, according to RFC 8707 Section 2" -- spec 2025-11-25 basic/authorization. Each
validator checks the audience against the endpoint's URL (``resource``).

Their database reads run in the auth threads (``users.in_auth_thread``), never on Channels' one
thread-sensitive thread: another caller's slow query there would hold every token check up.
"""
import asyncio
import base64
import json
import logging
import time
import urllib.error
import urllib.parse
import urllib.request

from django.apps import apps
from django.contrib.auth import get_user_model

from ..logs import client_value
from ..protocol.auth import parse_scopes
from . import Principal, TokenValidator
from .users import in_auth_thread

logger = logging.getLogger(__name__)


class StaticTokenValidator(TokenValidator):
    """``McpToken``: stored hashed; scoped, expiring, revocable."""

    revocable = True

    async def validate(self, token, resource):
        from ..models import McpToken

        if not token.startswith(McpToken.PREFIX):
            return None
        return await in_auth_thread(self._lookup)(token)

    def _lookup(self, token):
        from ..models import McpToken
        from . import token_digest

        row = McpToken.objects.select_related("user").filter(digest=token_digest(token)).first()
        if row is None or row.status != "active" or not row.user.is_active:
            return None
        expires = row.expires_at.timestamp() if row.expires_at else None
        return Principal.for_user(row.user, scopes=parse_scopes(row.scope), expires_at=expires, source="static")


class OAuthToolkitValidator(TokenValidator):
    """django-oauth-toolkit's ``AccessToken`` rows, looked up by ``token_checksum`` (the token's
    SHA-256, so hashed-at-rest storage works too).

    ``require_resource`` (default True): a token must name this endpoint in its RFC 8707
    resource indicators (the official SDK clients always send ``resource``); False also
    accepts the toolkit's unrestricted tokens (no resource indicator at all)."""

    revocable = True

    def __init__(self, require_resource=True):
        self.require_resource = require_resource

    async def validate(self, token, resource):
        if not apps.is_installed("oauth2_provider"):
            return None
        return await in_auth_thread(self._lookup)(token, resource)

    def _lookup(self, token, resource):
        from oauth2_provider.models import get_access_token_model

        from . import token_digest

        row = get_access_token_model().objects.select_related("user", "application").filter(
            token_checksum=token_digest(token)).first()
        if row is None or row.is_expired():
            return None
        if not row.resource and self.require_resource:
            return None
        if not row.allows_audience(resource):
            return None
        fields = {"scopes": parse_scopes(row.scope), "expires_at": row.expires.timestamp(),
                  "source": "oauth_toolkit"}
        client_id = row.application.client_id if row.application else ""
        if row.user is not None:
            if not row.user.is_active:
                return None
            return Principal.for_user(row.user, client_id=client_id, **fields)
        return Principal.for_client(client_id, **fields)  # client credentials: no user


def _user_for(username: str, create: bool):
    """The Django user named by a token's claim; created on first sight when ``create``."""
    model = get_user_model()
    if create:
        user, _ = model.objects.get_or_create(**{model.USERNAME_FIELD: username})
    else:
        user = model.objects.filter(**{model.USERNAME_FIELD: username}).first()
    return user if user is not None and user.is_active else None


class _ExternalValidator(TokenValidator):
    """Shared by the validators of another authorization server's tokens: how a token's
    subject becomes a Django user, and how its claims become a principal."""

    def __init__(self, *, issuer=None, audience=None, username_claim="sub", create_users=True, leeway=30):
        #: Tokens must be issued by this issuer (``iss``); None accepts any.
        self.issuer = issuer
        #: The audience to require; None: the endpoint's URL (RFC 8707).
        self.audience = audience
        self.username_claim, self.create_users, self.leeway = username_claim, create_users, leeway

    def audiences(self, resource):
        audience = self.audience or resource
        return [audience] if isinstance(audience, str) else list(audience)

    def principal(self, claims, resource, source):
        username = claims.get(self.username_claim)
        if not isinstance(username, str) or not username:
            return None
        user = _user_for(username, self.create_users)
        if user is None:
            return None
        scopes = parse_scopes(claims.get("scope", claims.get("scp")))
        expires = claims.get("exp") if isinstance(claims.get("exp"), (int, float)) else None
        return Principal.for_user(user, scopes=scopes, expires_at=expires, source=source,
                                  client_id=str(claims.get("client_id", claims.get("azp", ""))))


class JwtValidator(_ExternalValidator):
    """JWT access tokens (RFC 9068) of an external authorization server.

    Options: ``jwks_uri`` (required), ``issuer`` (required: the ``iss`` tokens must carry),
    ``audience`` (default: the endpoint's URL), ``algorithms`` (default RS256, ES256, PS256,
    EdDSA; never "none" or HMAC), ``username_claim`` ("sub"), ``create_users`` (True: a new
    subject becomes a Django user), ``leeway`` (seconds of clock skew, 30), ``jwks_lifespan``
    (seconds the key set is cached, 300), ``jwks_cooldown`` (an unknown ``kid`` refetches the
    set at once, then not again for these seconds, 30: a forged kid cannot make us hammer the
    authorization server)."""

    def __init__(self, *, jwks_uri, issuer, algorithms=("RS256", "ES256", "PS256", "EdDSA"),
                 jwks_lifespan=300, jwks_cooldown=30, **options):
        import jwt

        super().__init__(issuer=issuer, **options)
        self.algorithms = list(algorithms)
        self.jwks = jwt.PyJWKClient(jwks_uri, cache_jwk_set=True, lifespan=jwks_lifespan, timeout=10,
                                     cooldown_duration=jwks_cooldown)

    async def validate(self, token, resource):
        if token.count(".") != 2:
            return None  # not a JWS compact serialization: another validator's token
        claims = await asyncio.get_running_loop().run_in_executor(None, self._decode, token, resource)
        if claims is None:
            return None
        return await in_auth_thread(self.principal)(claims, resource, "jwt")

    def _decode(self, token, resource):
        import jwt

        try:
            # Fetches the key set on first use, and again when the token names an unknown kid.
            key = self.jwks.get_signing_key_from_jwt(token)
            return jwt.decode(token, key, algorithms=self.algorithms, audience=self.audiences(resource),
                              issuer=self.issuer, leeway=self.leeway,
                              options={"require": ["exp", "iss", "aud", self.username_claim]})
        except jwt.PyJWKClientConnectionError:
            logger.warning("the JWKS at %s cannot be fetched", self.jwks.uri)
            return None
        except jwt.PyJWTError as exc:
            logger.info("JWT refused: %s", client_value(str(exc)))  # it may quote the token's header
            return None


class IntrospectionValidator(_ExternalValidator):
    """Opaque tokens, asked about at an RFC 7662 introspection endpoint.

    Options: ``url`` (required), ``client_id`` and ``client_secret`` (HTTP Basic client
    authentication, as RFC 7662 §2.1 expects), ``issuer`` and ``audience`` (checked when the
    answer carries ``iss`` / ``aud``; ``require_audience`` True refuses answers without
    ``aud``), ``username_claim`` ("username", falling back to "sub"), ``create_users``,
    ``timeout`` (seconds, 5). Answers are cached like any validation (AUTH_CACHE_SECONDS), so a
    token revoked at the authorization server is refused within that time."""

    def __init__(self, *, url, client_id=None, client_secret=None, require_audience=True, timeout=5,
                 username_claim="username", **options):
        super().__init__(username_claim=username_claim, **options)
        self.url, self.timeout, self.require_audience = url, timeout, require_audience
        self.authorization = None
        if client_id is not None:
            pair = f"{urllib.parse.quote(client_id)}:{urllib.parse.quote(client_secret or '')}"
            self.authorization = "Basic " + base64.b64encode(pair.encode()).decode()

    async def validate(self, token, resource):
        claims = await asyncio.get_running_loop().run_in_executor(None, self._introspect, token)
        if claims is None or not self._acceptable(claims, resource):
            return None
        if not isinstance(claims.get(self.username_claim), str):
            claims = {**claims, self.username_claim: claims.get("sub")}
        return await in_auth_thread(self.principal)(claims, resource, "introspection")

    def _introspect(self, token):
        body = urllib.parse.urlencode({"token": token, "token_type_hint": "access_token"}).encode()
        request = urllib.request.Request(self.url, data=body, method="POST", headers={
            "Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"})
        if self.authorization:
            request.add_header("Authorization", self.authorization)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                claims = json.loads(response.read())
        except (urllib.error.URLError, OSError, ValueError) as exc:
            logger.warning("token introspection at %s failed: %s", self.url, exc)
            return None
        return claims if isinstance(claims, dict) else None

    def _acceptable(self, claims, resource) -> bool:
        # RFC 7662 §2.2: "active" is REQUIRED; anything but true means the token is not usable.
        if claims.get("active") is not True:
            return False
        exp = claims.get("exp")
        if isinstance(exp, (int, float)) and exp + self.leeway < time.time():
            return False
        if self.issuer is not None and claims.get("iss") != self.issuer:
            return False
        audience = claims.get("aud")
        if audience is None:
            return not self.require_audience
        given = [audience] if isinstance(audience, str) else audience
        return any(a in given for a in self.audiences(resource))


