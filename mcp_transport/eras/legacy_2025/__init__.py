"""The 2025-11-25 session era: sessions over message transports (stdio, HTTP+SSE) and the
tasks utility (spec 2025-11-25 basic/utilities/tasks)."""
