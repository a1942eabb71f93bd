"""The shells: bytes in and out of the server, and nothing the eras or the methods decide.

- ``streamable_http.py``: Streamable HTTP on /mcp (the Channels consumer); it hands each POST to
  the era it belongs to (``eras/``).
- ``stdio.py`` and ``http_sse.py`` (the 2024-11-05 HTTP+SSE transport) carry messages rather than
  HTTP requests and share ``eras/legacy_2025/session.py``: the same sessions, event store,
  dispatch and Celery jobs as Streamable HTTP.
- ``sse_writer.py``: writing a stream's frames on one HTTP response (keep-alive, polling, takeover).
- ``serving.py``, ``request_limits.py``, ``endpoints.py``: what the app needs from daphne in front of it.
"""
