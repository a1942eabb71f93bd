"""Model fields that hold whatever a JSON-RPC message may carry, on every database.

JSON carries NUL (``"\\u0000"``) and, from tools, lone surrogates (``"\\ud800"``); clients may send
NUL anywhere: it is valid JSON and valid UTF-8. PostgreSQL refuses both: NUL in ``text`` and
``jsonb`` ("unsupported Unicode escape sequence"), a lone surrogate in ``jsonb``. So a session's
``clientInfo``, a tool's arguments, a progress token or a result holding one would fail its row's
write (issue 10: a background tool called with NUL in its arguments never answered).

- ``SafeJSONField`` stores such a value losslessly: as the one-key object
  ``{"mcp_transport.json": "<its JSON text>"}`` (a JSON string escapes the backslash, which every
  database takes), and reads it back as it was. A value that itself has that key is wrapped too,
  so reading is unambiguous. Non-finite floats, which JSON cannot carry at all, are stored as
  null (as JavaScript's ``JSON.stringify`` writes them).
- ``SafeCharField`` and ``SafeTextField`` replace NUL and lone surrogates with U+FFFD: those
  columns hold text for people (a client's name, a progress message, an error).

``wrap_json()`` and ``unwrap_json()`` do the same for JSON text written without the ORM
(``storage.persist.insert_rows``).

The fields deconstruct as Django's own: they change how values are converted, not the column,
so they need no migration.
"""
import json
import re

from django.db import models

from .protocol.jsonrpc import without_non_finite

#: The key of the object a value the database could not hold is stored in.
WRAPPED = "mcp_transport.json"

# In JSON text as json.dumps writes it (lower-case escapes): a NUL, a high surrogate not
# followed by a low one, or a low one not preceded by a high one. An escaped backslash before
# "u0000" matches too, which only wraps a value that did not need it.
_UNSAFE = re.compile(r"\\u0000|\\ud[89ab][0-9a-f]{2}(?!\\ud[c-f])|(?<!\\ud[89ab][0-9a-f]{2})\\ud[c-f][0-9a-f]{2}")
_MARKER = f'"{WRAPPED}"'
_UNSAFE_CHARS = re.compile("[\x00\ud800-\udfff]")


def wrap_json(text: str) -> str:
    """The JSON text to store for a value's JSON ``text``: itself, or its wrapper object."""
    if _UNSAFE.search(text) or _MARKER in text:
        return json.dumps({WRAPPED: text}, separators=(",", ":"))
    return text


def unwrap_json(value):
    """A value read from the database, unwrapped if it was stored wrapped."""
    if isinstance(value, dict) and len(value) == 1 and isinstance(value.get(WRAPPED), str):
        return json.loads(value[WRAPPED])
    return value


def safe_text(value):
    """Text a database column can hold: NUL and lone surrogates become U+FFFD."""
    if isinstance(value, str) and _UNSAFE_CHARS.search(value):
        return _UNSAFE_CHARS.sub("\ufffd", value)
    return value


class _AsDjangoField:
    def deconstruct(self):
        name, _path, args, kwargs = super().deconstruct()
        return name, f"django.db.models.{self.django_field}", args, kwargs


class SafeJSONField(_AsDjangoField, models.JSONField):
    django_field = "JSONField"

    def get_db_prep_value(self, value, connection, prepared=False):
        if not prepared:
            value = self.get_prep_value(value)
        if value is not None and not hasattr(value, "as_sql"):
            value = self._storable(value)
        return connection.ops.adapt_json_value(value, self.encoder)

    def _storable(self, value):
        try:
            text = json.dumps(value, cls=self.encoder, allow_nan=False)
        except ValueError:  # NaN or an infinity: JSON has no such numbers
            value = without_non_finite(value)
            text = json.dumps(value, cls=self.encoder)
        wrapped = wrap_json(text)
        return value if wrapped is text else {WRAPPED: text}

    def from_db_value(self, value, expression, connection):
        return unwrap_json(super().from_db_value(value, expression, connection))


class SafeCharField(_AsDjangoField, models.CharField):
    django_field = "CharField"

    def get_prep_value(self, value):
        return safe_text(super().get_prep_value(value))


class SafeTextField(_AsDjangoField, models.TextField):
    django_field = "TextField"

    def get_prep_value(self, value):
        return safe_text(super().get_prep_value(value))
