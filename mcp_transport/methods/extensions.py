"""The extensions this server declares (SEP-2133's ``capabilities.extensions``), in one table
both eras read: the 2025-11-25 ``initialize`` result and the 2026-07-28 ``server/discover``.

A module that implements an extension declares it once, with a function giving its settings
object now (or None while it has nothing to offer, e.g. no tool uses it)::

    from mcp_transport.methods import extensions

    extensions.declare("com.example/thing", lambda: {"version": 1})

and a tool reads what the client declared with ``ctx.client_extension("com.example/thing")``
(its settings, or None). The skills, tasks and apps extensions go through it too.
"""
from dataclasses import dataclass
from typing import Callable, Optional

from ..protocol import versions

LEGACY = "2025-11-25"
MODERN = versions.MODERN[0]
BOTH_ERAS = (LEGACY, MODERN)


@dataclass(frozen=True)
class Extension:
    identifier: str
    #: ``settings() -> dict | None``: its entry in ``capabilities.extensions``, None: not now.
    settings: Callable[[], Optional[dict]]
    #: The eras that declare it (the tasks extension is 2026-07-28's only).
    eras: tuple = BOTH_ERAS


#: Every declared extension, by identifier.
DECLARED: dict = {}


def declare(identifier: str, settings: Callable[[], Optional[dict]], *, eras: tuple = BOTH_ERAS) -> None:
    """Declare an extension (again: replaces it). ``settings`` runs at each initialize and
    discover, so it must be cheap and must not query the database."""
    unknown = set(eras) - set(BOTH_ERAS)
    if unknown:
        raise ValueError(f"Unknown eras {sorted(unknown)}; use {', '.join(BOTH_ERAS)}.")
    DECLARED[identifier] = Extension(identifier, settings, tuple(eras))


def offered(era: str) -> dict:
    """``capabilities.extensions`` for ``era``: each extension that has something to offer now."""
    return {ext.identifier: settings for ext in DECLARED.values()
            if era in ext.eras and (settings := ext.settings()) is not None}


def offers(identifier: str, era: str) -> bool:
    ext = DECLARED.get(identifier)
    return ext is not None and era in ext.eras and ext.settings() is not None
