"""The paths this process serves MCP on, as ``routing`` routes them (imports nothing: both the
router, above the shell, and the daphne limits, inside it, read it)."""

#: Suffixes of the paths whose request bodies MAX_REQUEST_BYTES bounds while they arrive under
#: daphne ("/mcp"); ``routing.mcp_path()`` adds each endpoint it routes.
MCP_PATHS = set()
