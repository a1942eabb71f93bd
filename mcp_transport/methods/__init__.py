"""The MCP methods, era-independent: the registry of tools, resources and prompts, ``dispatch``,
the ``Context`` a tool gets, content blocks, server-initiated notifications. No HTTP here."""
