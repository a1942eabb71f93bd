"""The one rule for the shape of what a client sends: how deep it nests, how long its ids are.

Everything a client controls and the server keeps, logs or echoes -- ``initialize``'s
``clientInfo`` and ``capabilities``, ``_meta`` (a 2026-07-28 request's included), request ids and
progress tokens, tool arguments kept in a job's row, the answers to elicitation, sampling and
roots -- arrives in one JSON-RPC message, so it is checked once, as the message is parsed and
before anything is stored: the body's size (``MAX_REQUEST_BYTES``) bounds the bytes, this bounds
the nesting (``MAX_JSON_DEPTH``) and the ids (``MAX_ID_BYTES``). Without a depth bound a 3 KB
``clientInfo`` nested 500 deep made every recursive encoder on its way (JSON, the ORM, the
admin) raise RecursionError after the session's row was written.
"""
import json
from dataclasses import dataclass

from .errors import InvalidParams, InvalidRequest


@dataclass(frozen=True, kw_only=True)
class Bounds:
    #: Arrays and objects inside one another, the message itself counting as 1.
    max_depth: int = 64
    #: UTF-8 bytes of a string request id or progress token.
    max_id_bytes: int = 256


DEFAULT = Bounds()


def check_depth(obj, text: str, max_depth: int) -> None:
    """-32602 (HTTP 400) when ``obj``, parsed from ``text``, nests deeper than ``max_depth``.

    Level by level, so depth costs no stack; a message with fewer brackets than the bound
    (nearly every one) is not walked at all."""
    if text.count("{") + text.count("[") <= max_depth:
        return
    level, depth = [obj], 1
    while level:
        if depth > max_depth:
            raise InvalidParams(f"The message nests arrays and objects more than {max_depth} deep, "
                                "deeper than this server accepts.", http_status=400)
        inner = []
        for value in level:
            inner += [child for child in (value.values() if type(value) is dict else value)
                      if type(child) in _CONTAINERS]
        level, depth = inner, depth + 1


_CONTAINERS = (dict, list)


def check_id(value, what: str, max_id_bytes: int) -> None:
    """-32600 (HTTP 400) when a string id is longer than ``max_id_bytes`` in UTF-8: it is kept
    with every event of its stream and in logs."""
    if isinstance(value, str) and len(value) * 4 > max_id_bytes and len(value.encode()) > max_id_bytes:
        raise InvalidRequest(f"{what} is longer than {max_id_bytes} bytes.")


def kept_bytes(*values) -> int:
    """UTF-8 bytes of ``values`` as compact JSON: what keeping them costs (a session's clientInfo
    and capabilities, a 2026-07-28 request's, copied into its job's row)."""
    return sum(len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()) for value in values)
