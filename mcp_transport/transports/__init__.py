"""Transports besides Streamable HTTP (which is ``consumers.py``): stdio and the 2024-11-05
HTTP+SSE transport. Both carry messages rather than HTTP requests and share ``session.py``:
the same sessions, event store, dispatch and Celery jobs as Streamable HTTP."""
