"""The modern era (2026-07-28, stateless requests): requests on /mcp without a session, answered by the methods of
``methods/``; multi-round-trip requests; background calls and the tasks extension."""
