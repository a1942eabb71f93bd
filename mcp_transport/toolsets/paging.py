"""Keyset pagination of a queryset, with MCP's opaque cursors.

"The cursor is an opaque string token ... Provide stable cursors" -- spec 2025-11-25
server/utilities/pagination. A page is ordered by one field, then the primary key (so rows
with equal values keep one order), nulls last in both directions on every database. The cursor
is the last row's (value, key), signed, together with a digest of the query that made the page:
it continues only that query, and a row added or removed between two pages moves no other row
from one page to another (an offset would). The rows are always read through the caller's own
queryset, so a cursor (even a forged one) cannot reach a row outside it.
"""
import hashlib
import json

from django.core import signing
from django.db.models import F, Q

from .schema import exact_text, parse_value


class CursorError(ValueError):
    """A cursor this server did not issue, or one of another query."""


def query_digest(arguments: dict) -> str:
    """What a cursor is bound to: every argument but the cursor and the page size."""
    query = {k: v for k, v in arguments.items() if k not in ("cursor", "limit")}
    return hashlib.sha256(json.dumps(query, sort_keys=True, default=str).encode()).hexdigest()[:16]


def order(queryset, field, descending: bool):
    expression = F(field.attname)
    sort = expression.desc(nulls_last=True) if descending else expression.asc(nulls_last=True)
    return queryset.order_by(sort, "pk")


def page(queryset, *, field, descending, size, cursor, salt, digest):
    """(rows, next cursor or None): at most ``size`` rows after ``cursor``."""
    if cursor:
        queryset = queryset.filter(_after(field, descending, *_read(cursor, salt, digest)))
    rows = list(order(queryset, field, descending)[:size + 1])
    if len(rows) <= size:
        return rows, None
    last = rows[size - 1]
    return rows[:size], signing.dumps([digest, exact_text(last, field), exact_text(last, last._meta.pk)],
                                      salt=salt, compress=True)


def _read(cursor, salt, digest):
    try:
        issued_for, value, key = signing.loads(cursor, salt=salt)
    except (signing.BadSignature, TypeError, ValueError):
        raise CursorError("The cursor is not one this tool issued.") from None
    if issued_for != digest:
        raise CursorError("The cursor belongs to a query with other arguments: send the same ones, or no cursor.")
    return value, key


def _after(field, descending, value, key):
    """The rows after (value, key) in the order of ``order()``."""
    name, pk = field.attname, {"pk__gt": key}
    if value is None:  # nulls come last: only later nulls remain
        return Q(**{f"{name}__isnull": True}, **pk)
    value = parse_value(field, value)
    beyond = Q(**{f"{name}__lt" if descending else f"{name}__gt": value})
    return beyond | Q(**{name: value}, **pk) | Q(**{f"{name}__isnull": True})
