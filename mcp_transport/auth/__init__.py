"""Who is calling: the OAuth 2.1 resource server in front of the MCP endpoint.

With ``MCP_TRANSPORT["AUTH"]`` on, every request carries ``Authorization: Bearer <token>``
("authorization MUST be included in every HTTP request from client to server, even if they are
part of the same logical session" -- spec 2025-11-25 basic/authorization). ``authenticate()``
turns the token into a ``Principal`` through the ``AUTH_VALIDATORS`` (validators.py), or raises
the 401 / 403 that tells the client where to get a token. Off, the principal is whoever an ASGI
auth middleware put in the scope (usually nobody), as before.

The principal's ``key`` is what sessions, their streams and replays, jobs and tasks are bound
to: a request of another key presenting a session id gets 404.

Caching (so that an authenticated request costs no database query): a validation result is kept
in Redis for ``AUTH_CACHE_SECONDS`` (never past the token's expiry), keyed by the token's
SHA-256, which is also django-oauth-toolkit's ``token_checksum``. Results are also kept in
process memory: those of tokens that cannot be revoked before they expire (JWTs) for as long,
those of revocable ones (static tokens, the toolkit's) for AUTH_REVOCABLE_MEMORY_SECONDS (10),
so that a busy client's token costs no Redis read per request. Revoking one publishes it on the
control channel, so every process drops the token from its memory at once (the revoking one
before ``revoked()`` returns), and replaces its Redis entry with a tombstone, so a process
that reads Redis refuses it on its very next request and a validation racing with the
revocation cannot cache the token again. Only a request racing with the control message, or a
process that missed it (its subscription was down), may still accept the token, for at most
AUTH_REVOCABLE_MEMORY_SECONDS (0: Redis on every request).

The token's user comes with its permissions loaded, kept in process memory too (users.py:
``load_user``); a change of a user's permissions, groups or flags drops it in every process
(permissions.py). Validators' and user loads' database reads run in auth threads of their own
(``in_auth_thread``), not on Channels' one thread-sensitive thread.

A stream outlives the request that opened it, so it watches its token (``watch_token``): it
ends when the token expires, and when the control channel says the token was revoked or
changed (``end_streams``), with no Redis round trip per event.
"""
import asyncio
import hashlib
import json
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass, field, replace
from functools import cache
from typing import Callable, Optional

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from ..conf import get_config
from ..connections import async_redis, keys, publish
from ..protocol import auth as wire
from ..protocol.errors import TransportError
from ..state import switches
from . import failures, users
from .users import _Memory, in_auth_thread, load_user  # noqa: F401  (auth.load_user, auth.in_auth_thread)

#: The Redis value that marks a revoked token (``revoked()``).
TOMBSTONE = "revoked"


@dataclass(frozen=True)
class Principal:
    """The authenticated caller of one request.

    ``key`` is what its sessions are bound to: ``user:<pk>`` for a Django user, ``client:<id>``
    for a client acting for itself (client credentials), ``""`` for nobody (auth off)."""

    key: str = ""
    user_id: Optional[int] = None
    scopes: frozenset = frozenset()
    #: Unix time after which the token is no longer accepted; None: it does not expire.
    expires_at: Optional[float] = None
    client_id: str = ""
    #: Which validator accepted the token: "static", "oauth_toolkit", "jwt", "introspection".
    source: str = ""
    #: The token can be revoked before it expires: never trusted from process memory.
    revocable: bool = False
    #: The resource (endpoint URL) the token was validated for (RFC 8707 audience).
    resource: str = ""
    #: The Django user (``ctx.user``); not cached with the principal, loaded by id.
    user: object = field(default=None, compare=False, repr=False)
    #: The SHA-256 of the token this request presented (``watch_token``); not cached either.
    digest: str = field(default="", compare=False, repr=False)
    #: When this request's token check began (Unix time): a revocation heard after it, before
    #: the stream watched the token, still ends the stream (``watch_token``).
    checked_at: float = field(default=0.0, compare=False, repr=False)

    @classmethod
    def for_user(cls, user, **fields) -> "Principal":
        return cls(key=f"user:{user.pk}", user_id=user.pk, user=user, **fields)

    @classmethod
    def for_client(cls, client_id: str, **fields) -> "Principal":
        return cls(key=f"client:{client_id}", client_id=client_id, **fields)

    @classmethod
    def from_scope(cls, scope) -> "Principal":
        """Auth off: the user an ASGI auth middleware put in the scope, if any."""
        user = scope.get("user") or AnonymousUser()
        if getattr(user, "is_authenticated", False):
            return cls.for_user(user)
        return cls(user=user)

    def of_request(self, user, digest: str, checked_at: float) -> "Principal":
        """This principal with one request's user, token digest and check time: what
        ``dataclasses.replace`` does, without its validation (20 us a request on a busy core)."""
        made = object.__new__(Principal)
        made.__dict__.update(self.__dict__, user=user, digest=digest, checked_at=checked_at)
        return made

    def has_scopes(self, scopes) -> bool:
        return set(scopes) <= self.scopes

    def usable(self, resource: str, now: float) -> bool:
        return self.resource == resource and (self.expires_at is None or now < self.expires_at)

    def to_json(self) -> str:
        data = asdict(self)
        data.pop("user")
        data.pop("digest")
        data.pop("checked_at")
        data["scopes"] = sorted(self.scopes)
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: str) -> "Principal":
        data = json.loads(raw)
        data["scopes"] = frozenset(data["scopes"])
        return cls(**data)


class TokenValidator:
    """Turns a bearer token into a Principal. Subclass it and name it in ``AUTH_VALIDATORS``
    (``{"BACKEND": "dotted.path", "OPTIONS": {...}}``; OPTIONS are the constructor's keyword
    arguments). Validators are tried in order; the first principal wins."""

    #: Tokens of this kind can be revoked before they expire (see the module docstring).
    revocable = False

    def __init__(self, **options):
        if options:
            raise TypeError(f"{type(self).__name__} takes no options: {', '.join(sorted(options))}.")

    async def validate(self, token: str, resource: str) -> Optional[Principal]:
        """The principal of a valid token issued for ``resource``; None for any other token
        (unknown, expired, revoked, for another audience, badly signed, not of this kind)."""
        raise NotImplementedError


class Unauthorized(TransportError):
    """401: "Invalid or expired tokens MUST receive a HTTP 401 response"."""

    http_status = 401


class InsufficientScope(TransportError):
    """403: "the server SHOULD respond with HTTP 403 Forbidden and include ... error="insufficient_scope""."""

    http_status = 403


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@cache
def configured_validators() -> tuple:
    built = []
    for entry in get_config()["AUTH_VALIDATORS"]:
        built.append(import_string(entry["BACKEND"])(**entry.get("OPTIONS", {})))
    return tuple(built)


_principals = _Memory()  # token digest -> Principal (tokens that cannot be revoked)


@receiver(setting_changed)
def _reset(*, setting, **kwargs):
    if setting == "MCP_TRANSPORT":
        configured_validators.cache_clear()
        _principals.clear()
        failures.clear()
        users.clear()


# -- the request's resource ------------------------------------------------------------------

def resource_url(scope, host: Optional[str], path: Optional[str] = None) -> str:
    """The endpoint's URL: ``AUTH_RESOURCE``, or the request's scheme, Host and path (``path``:
    the endpoint's own, when the request goes to another URL of it, as /messages is /sse's).
    The one URL of the endpoint: its 401s, its tokens' audience, its Server Card's remote."""
    configured = get_config()["AUTH_RESOURCE"]
    if configured:
        return configured
    return f"{request_scheme(scope)}://{host}{scope.get('root_path', '')}{path or scope['path']}"


def request_scheme(scope) -> str:
    """The scheme as Django's ``HttpRequest.scheme`` says it (so the protected resource
    metadata's view agrees): behind a proxy that ends TLS, SECURE_PROXY_SSL_HEADER's header
    ("X-Forwarded-Proto: https") when it is set and present, else the connection's."""
    proxy_header = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy_header:
        name, secure_value = proxy_header
        wanted = name.removeprefix("HTTP_").replace("_", "-").lower().encode("latin-1")
        for key, value in scope.get("headers", ()):
            if key.lower() == wanted:
                return "https" if value.decode("latin-1").split(",", 1)[0].strip() == secure_value else "http"
    return scope.get("scheme", "http")


def authorization_servers(resource: str) -> list:
    """``AUTH_SERVERS``, or this server's origin (the project is its own authorization server)."""
    configured = get_config()["AUTH_SERVERS"]
    if configured:
        return list(configured)
    scheme, _, rest = resource.partition("://")
    return [f"{scheme}://{rest.split('/', 1)[0]}"]


def challenge_scopes() -> list:
    config = get_config()
    return list(config["AUTH_REQUIRED_SCOPES"] or config["AUTH_SCOPES"])


# -- authentication ----------------------------------------------------------------------------

async def authenticate(scope, headers, path: Optional[str] = None,
                       address: Optional[Callable[[], str]] = None) -> Principal:
    """The caller of this request, or Unauthorized / InsufficientScope / LimitReached (too many
    failed lookups from its network: failures.py). Off: ``from_scope``. ``path``: the protected
    resource's path when it is not the request's (``resource_url``); ``address``: gives the
    client's address, asked only when the token must be looked up."""
    config = get_config()
    if not config["AUTH"]:
        return Principal.from_scope(scope)
    resource = resource_url(scope, headers.get("host"), path)
    checked_at = time.time()
    token = wire.bearer_token(headers.get("authorization"))
    if token is None:
        raise Unauthorized("Authorization required: send an OAuth bearer token.",
                           headers=[("WWW-Authenticate", wire.challenge(resource, challenge_scopes()))])
    digest = token_digest(token)
    principal = await validate(token, resource, digest, address)
    if principal is None:
        raise Unauthorized("The access token is invalid, expired or not issued for this server.", headers=[(
            "WWW-Authenticate", wire.challenge(resource, challenge_scopes(), "invalid_token",
                                               "The access token is invalid or expired."))])
    user = AnonymousUser()
    if principal.user_id is not None:
        user = await load_user(principal.user_id)
        if not user.is_authenticated:  # deleted or deactivated since the token was issued
            raise Unauthorized("The access token's user is inactive.", headers=[(
                "WWW-Authenticate", wire.challenge(resource, challenge_scopes(), "invalid_token",
                                                   "The token's user is inactive."))])
    require_scopes(principal, config["AUTH_REQUIRED_SCOPES"], resource)
    return principal.of_request(user, digest, checked_at)


def access(permission, scopes) -> dict:
    """Who may use a tool, resource, prompt or skill, as declared: ``permission="app.codename"``
    (a Django permission) and ``scopes=[...]`` (token scopes); ValueError for anything else."""
    if permission is not None and (not isinstance(permission, str) or permission.count(".") != 1):
        raise ValueError(f"permission must be 'app_label.codename', not {permission!r}.")
    if isinstance(scopes, str) or not all(isinstance(s, str) and s and " " not in s for s in scopes or ()):
        raise ValueError(f"scopes must be a list of scope names, not {scopes!r}.")
    return {"permission": permission, "scopes": tuple(scopes or ())}


def may_use(spec, principal) -> bool:
    """Whether the caller may see and use a tool, resource or prompt: "tools the caller may not
    use are absent from tools/list and refused on call". A spec's ``scopes`` apply while AUTH is
    on (they are a token's); its ``permission`` is the Django user's ``has_perm`` (with no user,
    AnonymousUser's: none). A tool an operator switched off (state/switches.py) is no one's."""
    off = getattr(spec, "input_schema", None) is not None and switches.is_off(spec.name)  # only tools have one
    return not off and not missing_scopes(spec, principal) and permitted(spec, principal)


def permitted(spec, principal) -> bool:
    """The spec's ``permission`` (the user's ``has_perm``) and its ``visible(principal)`` check,
    if it has one (the toolsets' per-principal checks, e.g. a ModelAdmin's has_view_permission)."""
    user = getattr(principal, "user", None)
    if spec.permission is not None and not (user is not None and user.has_perm(spec.permission)):
        return False
    visible = getattr(spec, "visible", None)
    return visible is None or bool(visible(principal))


def missing_scopes(spec, principal) -> list:
    if not spec.scopes or not get_config()["AUTH"]:
        return []
    granted = principal.scopes if principal is not None else frozenset()
    return sorted(set(spec.scopes) - granted)


def require_spec_scopes(spec, principal: Principal, scope, headers) -> None:
    """403 ``insufficient_scope`` for a call of a spec whose scopes the token lacks, before the
    response starts, so that the client can ask for them (step-up authorization). A caller
    without the spec's permission gets no 403: to it the spec does not exist."""
    if spec is None or not missing_scopes(spec, principal) or not permitted(spec, principal):
        return
    # The resource the token was checked for: /messages challenges for /sse's.
    require_scopes(principal, spec.scopes, principal.resource or resource_url(scope, headers.get("host")))


def require_scopes(principal: Principal, scopes, resource: str) -> None:
    if not get_config()["AUTH"] or principal.has_scopes(scopes):
        return
    # The challenge names what the client must ask for: what it has plus what it lacks.
    wanted = sorted(principal.scopes | set(scopes))
    raise InsufficientScope(f"The access token lacks the scope {' '.join(sorted(set(scopes) - principal.scopes))}.",
                            headers=[("WWW-Authenticate", wire.challenge(resource, wanted, "insufficient_scope"))])


async def validate(token: str, resource: str, digest: Optional[str] = None,
                   address: Optional[Callable[[], str]] = None) -> Optional[Principal]:
    """The token's principal, from process memory, Redis, or the validators (then cached); a
    refusal is remembered briefly, and lookups are bounded per client network (failures.py).
    ``digest``: the token's ``token_digest``, when the caller has it already."""
    digest, now = digest or token_digest(token), time.time()
    principal = _principals.get(digest, now)
    if principal is not None and principal.usable(resource, now):
        return principal
    if failures.refused(digest, resource, now):
        return None
    client, key = async_redis(), keys().auth_token(digest)
    raw = await client.get(key)
    if raw == TOMBSTONE:
        return None
    if raw is not None:
        principal = Principal.from_json(raw)
        if principal.usable(resource, now):
            _remember(digest, principal, now)
            return principal
    principal, validator = await _look_up(token, resource, digest, address)
    if principal is None:
        return None
    principal = replace(principal, resource=resource, revocable=validator.revocable, user=None)
    ttl = _cache_seconds(principal, now)
    if ttl > 0:
        # NX: a tombstone written by a revocation meanwhile stays (the token stays refused).
        await client.set(key, principal.to_json(), px=int(ttl * 1000), nx=True)
        _remember(digest, principal, now)
    return principal


async def _look_up(token, resource, digest, address) -> tuple:
    """(principal, the validator that accepted it), or (None, None) remembered as refused; 429
    past the bound of lookups of the client's network, before any lookup (failures.py)."""
    lookup = await failures.Lookup.begin(address)
    heard = failures.generation()
    try:
        for validator in configured_validators():
            principal = await validator.validate(token, resource)
            if principal is not None:
                break
        else:
            failures.remember(digest, resource, time.time(), heard)
            return None, None
    except BaseException:
        await lookup.give_back()  # no verdict (the database is down, the client left): no failure
        raise
    await lookup.give_back()  # a good token is no failure
    return principal, validator


def _cache_seconds(principal: Principal, now: float) -> float:
    seconds = get_config()["AUTH_CACHE_SECONDS"]
    if principal.expires_at is not None:
        seconds = min(seconds, principal.expires_at - now)
    return seconds


def _remember(digest, principal, now):
    seconds = _cache_seconds(principal, now)
    if principal.revocable:
        seconds = min(seconds, get_config()["AUTH_REVOCABLE_MEMORY_SECONDS"] or 0)
    if seconds > 0:
        _principals.put(digest, principal, now + seconds)


def forget_local(digest: str) -> None:
    """A revocation, a change or a creation reached this process (the control channel): drop
    its memory of the token, accepted or refused."""
    _principals.entries.pop(digest, None)
    failures.forget(digest)


# -- revocation --------------------------------------------------------------------------------

def revoked(digests) -> None:
    """Refuse these tokens from now on, on every process (sync: admin, commands, signals). The
    tombstone outlives any cached entry; after it the validators refuse the token themselves."""
    from ..connections import sync_redis

    digests = list(digests)
    if not digests:
        return
    from ..state.control import message

    for digest in digests:  # this process (the admin's, the command's) at once, not when the message is back
        forget_local(digest)
    ttl = int(get_config()["AUTH_CACHE_SECONDS"]) + 60
    with sync_redis().pipeline(transaction=False) as pipe:
        for digest in digests:
            pipe.set(keys().auth_token(digest), TOMBSTONE, ex=ttl)
            publish(pipe, keys().control_channel(), message("auth_forget", digest))
        pipe.execute()


def changed(digests) -> None:
    """Forget the cached results of these tokens (their scope or expiry changed)."""
    from ..connections import sync_redis

    from ..state.control import message

    digests = list(digests)
    if not digests:
        return
    for digest in digests:
        forget_local(digest)
    with sync_redis().pipeline(transaction=False) as pipe:
        pipe.delete(*[keys().auth_token(digest) for digest in digests])
        for digest in digests:
            publish(pipe, keys().control_channel(), message("auth_forget", digest))
        pipe.execute()


def created(digests) -> None:
    """New tokens: a process that refused one of their values before (failures.py) looks it up
    again at once, every process through the control channel (sync: signals, on commit)."""
    from ..connections import sync_redis

    from ..state.control import message

    digests = list(digests)
    for digest in digests:
        failures.forget(digest)
    with sync_redis().pipeline(transaction=False) as pipe:
        for digest in digests:
            publish(pipe, keys().control_channel(), message("auth_created", digest))
        pipe.execute()


# -- streams opened with a token -----------------------------------------------------------------

#: token digest -> what ends each stream of this process that was opened with that token.
_stream_enders = {}
#: token digest -> when this process last heard it was revoked or changed, newest last: a stream
#: whose request was checked before that, but that began watching only after, ends too (the
#: round trips between a request's token check and its stream's first byte take a few ms).
_forgotten = OrderedDict()
#: How long a heard revocation is remembered for that purpose, and how many at most.
FORGOTTEN_SECONDS, FORGOTTEN_MAX = 60.0, 10_000


def watch_token(principal: Principal, end):
    """Call ``end()`` when the token a stream was opened with stops being good: at its expiry,
    or when it is revoked or changed on any process (``end_streams``). "Invalid or expired
    tokens MUST receive a HTTP 401 response": the stream ends so that the client comes back
    with a request, gets the 401 and authorizes again. Returns what stops watching (the stream
    ended by itself); with AUTH off there is nothing to watch."""
    digest = principal.digest if principal is not None else ""
    if not digest:
        return _not_watching
    timer = None
    if principal.expires_at is not None:
        timer = asyncio.get_running_loop().call_later(max(0.0, principal.expires_at - time.time()), end)
    _stream_enders.setdefault(digest, set()).add(end)
    if _forgotten.get(digest, -1.0) >= principal.checked_at:  # revoked while the stream was opening
        asyncio.get_running_loop().call_soon(end)

    def stop():
        if timer is not None:
            timer.cancel()
        held = _stream_enders.get(digest)
        if held is not None:
            held.discard(end)
            if not held:
                del _stream_enders[digest]

    return stop


def _not_watching():
    pass


def end_streams(digest: str) -> None:
    """A token was revoked or changed (the control channel's ``auth_forget``): end this
    process's streams that rely on it. A changed token's streams end too: the client opens them
    again under what the token allows now."""
    now = time.time()
    _forgotten.pop(digest, None)
    _forgotten[digest] = now
    while _forgotten and (len(_forgotten) > FORGOTTEN_MAX or next(iter(_forgotten.values())) < now - FORGOTTEN_SECONDS):
        _forgotten.popitem(last=False)
    for end in list(_stream_enders.pop(digest, ())):
        end()
