"""The protocol eras, one sub-package each: what only that era does on /mcp (and stdio, HTTP+SSE).

- ``legacy_2025``: the legacy era (2025-11-25 and earlier revisions: sessions): ``initialize``, sessions,
  the GET stream, ``Last-Event-ID``, the 2025-11-25 tasks utility.
- ``modern_2026``: the modern era (2026-07-28: stateless requests): ``server/discover``, per-request ``_meta``,
  multi-round-trip requests, ``subscriptions/listen``, the tasks extension.

Their wire rules (no I/O) are in ``protocol/``; what both eras share is in ``methods/``.
"""
