"""The legacy era (2025-11-25, sessions): sessions over message transports (stdio, HTTP+SSE) and the
tasks utility (spec 2025-11-25 basic/utilities/tasks)."""
