"""Opaque references to sessions, for the admin's lists: "session ids shortened in logs and
lists (the full id on the session page only, for users with the permission)" (issue 10).

A session id is today's only credential of a 2025-era session, and a changelist carries the
primary key in every row's link and action checkbox. The lists carry a reference instead: the
id's first ``PREFIX`` characters (which the list shows as text anyway) and a keyed HMAC of the
whole id (Django's ``salted_hmac``, keyed by ``SECRET_KEY``), so the HTML holds no more of the id
than its text does, and the rest cannot be derived from it. The server finds a session back by
the prefix (a range of the primary key's index) and the tag. Nothing is stored: a reference is
computed from the id wherever one is needed (the jobs list links to sessions it never loads). A
new ``SECRET_KEY`` changes the references (an old link names nothing; ``SECRET_KEY_FALLBACKS``
still resolve).
"""
import hmac
from functools import reduce
from operator import or_

from django.conf import settings
from django.db.models import Q
from django.utils.crypto import salted_hmac

#: Characters of the id a reference starts with: what the lists show.
PREFIX = 8
#: Never in a session id (base64url), so a reference is never taken for an id.
SEPARATOR = "."
_SALT = "mcp_transport.admin.session-reference"


def _tag(session_id: str, secret) -> str:
    return salted_hmac(_SALT, session_id, secret=secret, algorithm="sha256").hexdigest()[:24]


def session_ref(session_id: str) -> str:
    """The reference the admin's lists use for a session."""
    return f"{session_id[:PREFIX]}{SEPARATOR}{_tag(session_id, settings.SECRET_KEY)}"


def is_ref(value: str) -> bool:
    return SEPARATOR in value


def names(ref: str, session_id: str) -> bool:
    """Whether ``ref`` is a reference to ``session_id`` (under the key or a fallback)."""
    prefix, _, tag = ref.partition(SEPARATOR)
    if prefix != session_id[:PREFIX]:
        return False
    secrets = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    return any(hmac.compare_digest(tag, _tag(session_id, secret)) for secret in secrets)


def _prefix(ref: str) -> str:
    return ref.partition(SEPARATOR)[0]


def find(queryset, value):
    """The session of ``queryset`` that ``value`` names (a reference, or a full id), or None;
    one query."""
    if not is_ref(value):
        return queryset.filter(pk=value).first()
    if not _prefix(value):
        return None
    return next((session for session in queryset.filter(pk__startswith=_prefix(value))[:_CANDIDATES]
                 if names(value, session.pk)), None)


#: Sessions read at most for one reference: ids that share a prefix are rare (48 random bits).
_CANDIDATES = 100


def resolve(queryset, values) -> list:
    """The primary keys of ``queryset``'s sessions that ``values`` name, as references (one
    query for all of them) or, typed or posted by someone who has it, as full ids."""
    refs = [value for value in values if is_ref(value)]
    found = [value for value in values if not is_ref(value)]
    prefixes = {_prefix(ref) for ref in refs} - {""}
    if prefixes:
        candidates = queryset.filter(reduce(or_, (Q(pk__startswith=prefix) for prefix in prefixes)))
        found += [pk for pk in candidates.values_list("pk", flat=True) if any(names(ref, pk) for ref in refs)]
    return found
