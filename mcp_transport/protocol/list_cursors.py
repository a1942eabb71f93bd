"""The cursors of the list methods (tools/list, resources/list, resources/templates/list,
prompts/list, skills/list, resources/directory/read, tasks/list): the one place they are
written and read.

"The cursor is an opaque string token" to the client; to this server it is base64url of a small
JSON value. It comes back from the client, so it is read as untrusted input: "Invalid cursors
SHOULD result in an error with code -32602 (Invalid params)" -- spec 2025-11-25
server/utilities/pagination. ``read`` gives a method the values it issued the cursor with,
checked by the method's ``shape`` (the helpers below), or raises InvalidParams with one
sentence: whatever a cursor holds (not a string, not base64, not JSON, a value of another shape,
a date beyond what a database holds), nothing of it reaches a query unchecked and no request
ends in -32603.
"""
import base64
import binascii
import json
import re
from datetime import datetime, timezone
from typing import Any, Callable, TypeVar

from .errors import InvalidParams

T = TypeVar("T")

NOT_ISSUED = "The cursor is not one this server issued."

#: What reading a cursor may raise on a value this server did not write: bad base64 or JSON,
#: a string with a lone surrogate (ValueError, binascii.Error), a nesting deeper than the parser
#: goes (RecursionError), a shape's refusal (Malformed, a ValueError), a moment beyond year
#: 1..9999 once in UTC (OverflowError).
_UNREADABLE = (ValueError, binascii.Error, RecursionError, OverflowError)


class Malformed(ValueError):
    """A cursor's value is not of the shape its method writes."""


def issue(value) -> str:
    """The cursor of ``value`` (a JSON value)."""
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode()


def read(cursor, shape: Callable[[Any], T]) -> T:
    """``shape`` of the value ``cursor`` carries; InvalidParams for anything this server did not issue."""
    try:
        if not isinstance(cursor, str):
            raise Malformed("not a string")
        return shape(json.loads(base64.urlsafe_b64decode(cursor.encode())))
    except _UNREADABLE:
        raise InvalidParams(NOT_ISSUED) from None


# -- shapes: each returns the checked value or raises Malformed -------------------------------------

def field(value, name: str):
    """``value[name]`` of an object."""
    if not isinstance(value, dict) or name not in value:
        raise Malformed(f"no {name}")
    return value[name]


def items(value, count: int) -> list:
    """The ``count`` items of an array of that length."""
    if not isinstance(value, list) or len(value) != count:
        raise Malformed(f"not {count} items")
    return value


def text(value, pattern: re.Pattern = None) -> str:
    """A string (matching ``pattern`` in full, when given)."""
    if not isinstance(value, str) or (pattern is not None and pattern.fullmatch(value) is None):
        raise Malformed("not the text it was")
    return value


def optional_text(value):
    return None if value is None else text(value)


def moment(value, aware: bool = True) -> datetime:
    """An ISO 8601 moment: with its offset, in UTC, when ``aware`` (a project with USE_TZ), else
    without one. A moment a database can hold: 0001-01-01T00:00:00+23:59 is before year 1 in UTC
    and raises OverflowError here, not in a query."""
    parsed = datetime.fromisoformat(text(value))
    if (parsed.tzinfo is not None) != aware:
        raise Malformed("an offset where none was written, or none where one was")
    return parsed.astimezone(timezone.utc) if aware else parsed
