"""Sealing the ``requestState`` of multi-round-trip requests (protocol/mrtr.py has the claims).

The seal is Django's own: ``django.core.signing`` (HMAC-SHA256 keyed from ``SECRET_KEY``, with
``SECRET_KEY_FALLBACKS`` for key rotation, and a timestamp checked against ``max_age``). Every
web process of a deployment shares the key, so a retry may land on any of them. "servers MUST
treat requestState as an attacker-controlled input ... use HMAC or AEAD ... MUST reject state
that fails verification" -- spec 2026-07-28 basic/patterns/mrtr.

The state is signed, not encrypted: what it carries (the client's own earlier answers, the
job a call waits on) is nothing the client may not read, and nothing it can change.

Nor compressed: what a state unseals to is never more than the state itself. A compressed one
let a 5 KB state of a client's repetitive answer inflate to 3.9 MB on every retry. A sealed
state is at most ``MAX_REQUEST_STATE_BYTES``: a round whose answers would make a longer one is
refused (-32602), and a longer one presented is refused before its signature is checked.
"""
from typing import Optional

from django.core import signing

from ...conf import get_config
from ...protocol import mrtr

#: Namespaces the HMAC key: a value Django signs for anything else never verifies here.
SALT = "mcp_transport.request_state"
#: How django.core.signing marks a compressed payload (its first character).
COMPRESSED = "."


def principal(call) -> Optional[str]:
    """Who a state is bound to, in one place: the request's authenticated principal
    (``auth.Principal.key``: ``user:<pk>``, ``client:<id>``), None when authorization is off."""
    return getattr(call.session, "principal", "") or None


def seal(method: str, params: dict, call, payload: dict) -> str:
    claims = mrtr.make_claims(method, params, principal(call), payload)
    token, limit = signing.dumps(claims, salt=SALT), get_config()["MAX_REQUEST_STATE_BYTES"]
    if len(token) > limit:
        raise mrtr.too_much_to_carry(len(token), limit)
    return token


def unseal(token: str, method: str, params: dict, call) -> dict:
    """The payload of a state this server sealed for this request and principal, not older than
    ``REQUEST_STATE_TTL``; ``mrtr.BadRequestState`` (-32602) otherwise."""
    config = get_config()
    if len(token) > config["MAX_REQUEST_STATE_BYTES"]:
        raise mrtr.oversized(config["MAX_REQUEST_STATE_BYTES"])
    if token.startswith(COMPRESSED):  # this server seals none: never inflated, whoever made it
        raise mrtr.tampered()
    try:
        claims = signing.loads(token, salt=SALT, max_age=config["REQUEST_STATE_TTL"])
    except signing.SignatureExpired:
        raise mrtr.expired() from None
    except (signing.BadSignature, ValueError, TypeError):
        raise mrtr.tampered() from None
    return mrtr.check_claims(claims, method, params, principal(call))


def payload_of(params: dict, method: str, call) -> dict:
    """The verified payload of the request's ``requestState``, or ``{}`` when it has none."""
    token = mrtr.request_state(params)
    return {} if token is None else unseal(token, method, params, call)
