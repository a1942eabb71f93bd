"""Text a database stores: the one rule for a client's strings that a tool hands the database.

JSON carries NUL (``"\\u0000"``), which PostgreSQL refuses in every text column and parameter
("PostgreSQL text fields cannot contain NUL (0x00) bytes": a DataError, and a traceback per
call), and a lone surrogate (``"\\ud800"``), which is no Unicode character and which no database
takes (``jsonrpc.parse`` already refuses one from a client; a tool may still pass one on). The
model toolsets' tools (``ToolSpec.database_text``) pass their arguments to the ORM as text --
searches, filters, orderings, the fields of a write, the keys of an admin action, a DRF
viewset's query -- so ``refuse`` checks every string of the arguments, keys included, before
the tool runs: -32602 with one sentence naming the argument.
"""
import re

from .errors import InvalidParams

#: A NUL, or any surrogate: in a Python string (JSON's pairs decode to one character) a
#: surrogate is always a lone one.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
#: A name a message shows as it is (a schema's property name); any other is "?".
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def unstorable(value, place: str):
    """(where, what) of the first string of ``value`` (a key or a value, at any depth) that no
    database stores as text, ``place`` naming ``value``; None when every one is text."""
    pending = [(place, value)]
    while pending:  # iterative: the message's depth is bounded, but depth costs no stack here
        where, value = pending.pop()
        if isinstance(value, str):
            found = _UNSTORABLE.search(value)
            if found is not None:
                return where, _what(found.group())
        elif isinstance(value, dict):
            for key in reversed(value):
                pending.append((f"{where}[{_shown(key)}]", value[key]))
                pending.append((f"a key of {where}", key))
        elif isinstance(value, list):
            pending.extend((f"{where}[{index}]", item) for index, item in reversed(list(enumerate(value))))
    return None


def refuse(arguments: dict, tool: str) -> None:
    """InvalidParams (-32602) when a string of ``arguments`` (a tool's) holds NUL or a lone
    surrogate: one sentence, naming the argument and what it holds."""
    for name, value in arguments.items():
        found = unstorable(name, "the name of an argument") or unstorable(value, _shown(name))
        if found is not None:
            where, what = found
            raise InvalidParams(f"Invalid arguments for tool {tool}: {where} holds {what}, "
                                "which this server's database does not store as text.")


def _what(char: str) -> str:
    kind = "a NUL character" if char == "\x00" else "a lone surrogate"
    return f"{kind} (U+{ord(char):04X})"


def _shown(name) -> str:
    """A name as the message shows it: itself when it is one a schema would declare (short,
    plain), else "?" -- the check runs before the schema's, on whatever names a client sent."""
    return name if _PLAIN_NAME.fullmatch(name) else "?"
