"""The shells: bytes in and out of the server, and nothing the eras or the methods decide.

- ``endpoint.py``: what every HTTP endpoint shares (the body, Origin/Host/method/token checks,
  the JSON and error replies).
- ``streamable_http.py``: Streamable HTTP on /mcp (the Channels consumer: checks and routing);
  the consumer hands each POST to a ``PostHandling`` (``streamable_post.py``), which hands it
  on as a ``PostExchange`` (``post_exchange.py``) to its era's: a 2025-11-25 ``initialize`` or
  session's request to ``legacy_post.py`` (the run phase, ``running/pipeline.py``, through
  ``LegacyPostResponder``), a 2026-07-28 request to ``modern_post.py`` (the same run phase
  through ``ModernPostResponder``),
  and each GET to a ``StreamGet`` (``streamable_get.py``: the GET stream and resumes), objects
  of their own that hold it.
- ``stdio.py`` and ``http_sse.py`` (the 2024-11-05 HTTP+SSE transport) carry messages rather than
  HTTP requests and share ``message_session.py``: the same sessions, event store,
  dispatch and Celery jobs as Streamable HTTP.
- ``sse_writer.py``: writing a stream's frames on one HTTP response (keep-alive, polling, takeover).
- ``serving.py``, ``request_limits.py``, ``endpoints.py``: what the app needs from daphne in front of it.
"""
