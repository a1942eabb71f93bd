"""What makes the calls log an audit trail: which calls change state, and what of their
arguments a row keeps.

A call **changes state** when it may have changed the project's data or a running call:

- ``tools/call`` of a registered tool whose ``annotations.readOnlyHint`` is not True: a plain
  ``@tool`` that says nothing, every write of a model toolset (create, update, delete), every
  admin action and every DRF write (toolsets/ set the hint per action);
- ``tasks/cancel`` and ``tasks/update`` that stopped or steered a running (background) call: their
  handler says so (``Call.changed``). One that found its task ended, or answered no question the
  task asked, changed nothing (its row is a read-only call's: a client repeating it spends its own
  share of the log, not the audit trail's rows);

unless it was refused before it ran: its answer is a JSON-RPC error other than -32603 (the tool
is unknown to the caller, its arguments or task are refused, its scopes are missing, its caller
runs its most calls already). Such a call changed nothing; its row is one of the read-only
calls', in its caller's share. A -32603 (a failure nobody meant) may come after a partial write,
so it counts as a change, as do a tool error, a cancel and a call handed to a job.

Everything else (the lists, ``resources/read``, ``prompts/get``, ``ping``, ``initialize``, a
read-only tool ...) changes nothing of the project: those calls alone are sampled
(``CALL_LOG_SAMPLE``) and capped per caller (``CALL_LOG_MAX_PER_SECOND``, running/calls.py).

A row's **arguments** are redacted (``redacted``, on the log's writer thread): each argument's
name is kept (the first ``MAX_NAMES``, ``NAME_CHARS`` characters each) with its value's type and
size only (``"<str: 12 chars>"``, ``"<int>"``, ``"<list: 3 items>"``, ``"<object: 2 keys>"``);
booleans and null are kept as they are. An argument named in ``CALL_LOG_ARGUMENTS_KEPT``
(default ``id``, ``pk``, ``ids``, ``pks``: the row a write targets) keeps its value when it is a
number, a string of at most ``VALUE_CHARS`` characters, or a list of at most ``LIST_ITEMS`` of
those. A name that looks like a secret's (``SECRET``: password, token, key, secret, auth,
session, cookie ...) is ``"<redacted>"`` always, even if listed as kept.
"""
import math
import re

from ..methods.method_table import target_of
from ..methods.registry import registry
from ..protocol.errors import ErrorCode

#: Methods that stop or steer a running call: recorded like a write.
STEERING = frozenset({"tasks/cancel", "tasks/update"})
#: Argument names never kept, whatever CALL_LOG_ARGUMENTS_KEPT says.
SECRET = re.compile(r"pass|secret|token|auth(?!ors?(?:$|[_-]))|credential|cookie|session|signature|private|key"
                    r"|(?:^|[_-])(?:otp|pin|cvv|ssn)(?:$|[_-])", re.IGNORECASE)
REDACTED = "<redacted>"
#: The bounds of what a row keeps of a call's arguments.
MAX_NAMES = 50
NAME_CHARS = 64
VALUE_CHARS = 100
LIST_ITEMS = 50
#: The largest integer kept as a number (a larger one is described).
MAX_INT = 10 ** 18


#: ``changes_state``'s ``tool`` when the caller did not look it up.
LOOK_UP = object()
NOT_A_TOOL_CALL = object()


def _tool_named(request):
    """The registered tool a tool call names (None: none of that name), or NOT_A_TOOL_CALL, as
    the request's method declares its target (methods/specs.py)."""
    target = target_of(request)
    if target is None or target[0] != "tool":
        return NOT_A_TOOL_CALL
    return registry.tools.get(target[1])


def changes_state(request, message, changed=None, tool=LOOK_UP) -> bool:
    """Whether the call may have changed state (above): its row is never sampled out, capped
    or dropped before a read-only call's. ``changed``: what its handler said (``Call.changed``).
    Costs a dict lookup on the request path."""
    if changed is False:
        return False
    if tool is LOOK_UP:  # a call with no route, or not a tool's (a route knows its tool)
        tool = _tool_named(request)
    if tool is not NOT_A_TOOL_CALL:
        return tool is not None and (tool.annotations or {}).get("readOnlyHint") is not True and not refused(message)
    if request.method not in STEERING:
        return False
    elif changed is None:  # its handler said nothing: it failed before it could (-32603), or changed nothing
        return failed(message)
    return not refused(message)


def failed(message) -> bool:
    """The answer is -32603: a failure nobody meant, which may have come after a change."""
    error = message.get("error") if message is not None else None
    return isinstance(error, dict) and error.get("code") == ErrorCode.INTERNAL_ERROR


def refused(message) -> bool:
    """The answer says the call was refused before it ran: a JSON-RPC error, but -32603."""
    error = message.get("error") if message is not None else None
    return isinstance(error, dict) and error.get("code") != ErrorCode.INTERNAL_ERROR


def kept_names(setting) -> frozenset:
    """CALL_LOG_ARGUMENTS_KEPT as a set (one string: that one name)."""
    return frozenset([setting] if isinstance(setting, str) else setting or ())


def redacted(arguments, kept: frozenset):
    """What a row keeps of a call's ``arguments`` (above); None when it has none."""
    if arguments is None:
        return None
    if not isinstance(arguments, dict):
        return shape(arguments)
    out = {}
    for count, (name, value) in enumerate(arguments.items()):
        if count == MAX_NAMES:
            out["…"] = f"<{len(arguments) - MAX_NAMES} more arguments>"
            break
        out[storable(str(name)[:NAME_CHARS])] = _value(str(name), value, kept)
    return out


def _value(name: str, value, kept: frozenset):
    if SECRET.search(name):
        return REDACTED
    if value is None or isinstance(value, bool):
        return value
    if name in kept:
        if _scalar(value):
            return storable(value)
        if isinstance(value, list) and len(value) <= LIST_ITEMS and all(map(_scalar, value)):
            return [storable(item) for item in value]
    return shape(value)


def _scalar(value) -> bool:
    """A value a kept argument keeps as it is."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return abs(value) < MAX_INT
    if isinstance(value, float):
        return math.isfinite(value)  # a JSON column takes no NaN
    return isinstance(value, str) and len(value) <= VALUE_CHARS


def shape(value) -> str:
    """A value as its type and size only."""
    if isinstance(value, str):
        return f"<str: {_count(len(value), 'char')}>"
    if isinstance(value, list):
        return f"<list: {_count(len(value), 'item')}>"
    if isinstance(value, dict):
        return f"<object: {_count(len(value), 'key')}>"
    if value is None:
        return "<null>"
    return f"<{type(value).__name__}>"  # bool, int, float


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def storable(value):
    """Client text as every database takes it: PostgreSQL refuses a NUL in text (one such call
    lost its whole batch of rows), and no database takes a lone surrogate (JSON may carry both)."""
    if not isinstance(value, str):
        return value
    return value.replace("\x00", "\N{REPLACEMENT CHARACTER}").encode("utf-8", "replace").decode("utf-8")
