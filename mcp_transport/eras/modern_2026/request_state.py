"""Sealing the ``requestState`` of multi-round-trip requests (protocol/mrtr.py has the claims).

The seal is Django's own: ``django.core.signing`` (HMAC-SHA256 keyed from ``SECRET_KEY``, with
``SECRET_KEY_FALLBACKS`` for key rotation, and a timestamp checked against ``max_age``). Every
web process of a deployment shares the key, so a retry may land on any of them. "servers MUST
treat requestState as an attacker-controlled input ... use HMAC or AEAD ... MUST reject state
that fails verification" -- spec 2026-07-28 basic/patterns/mrtr.

The state is signed, not encrypted: what it carries (the client's own earlier answers, the
job a call waits on) is nothing the client may not read, and nothing it can change.
"""
from typing import Optional

from django.core import signing

from ...conf import get_config
from ...protocol import mrtr

#: Namespaces the HMAC key: a value Django signs for anything else never verifies here.
SALT = "mcp_transport.request_state"


def principal(call) -> Optional[str]:
    """Who a state is bound to, in one place: the request's authenticated principal
    (``auth.Principal.key``: ``user:<pk>``, ``client:<id>``), None when authorization is off."""
    return getattr(call.session, "principal", "") or None


def seal(method: str, params: dict, call, payload: dict) -> str:
    claims = mrtr.make_claims(method, params, principal(call), payload)
    return signing.dumps(claims, salt=SALT, compress=True)


def unseal(token: str, method: str, params: dict, call) -> dict:
    """The payload of a state this server sealed for this request and principal, not older than
    ``REQUEST_STATE_TTL``; ``mrtr.BadRequestState`` (-32602) otherwise."""
    try:
        claims = signing.loads(token, salt=SALT, max_age=get_config()["REQUEST_STATE_TTL"])
    except signing.SignatureExpired:
        raise mrtr.expired() from None
    except (signing.BadSignature, ValueError, TypeError):
        raise mrtr.tampered() from None
    return mrtr.check_claims(claims, method, params, principal(call))


def payload_of(params: dict, method: str, call) -> dict:
    """The verified payload of the request's ``requestState``, or ``{}`` when it has none."""
    token = mrtr.request_state(params)
    return {} if token is None else unseal(token, method, params, call)
