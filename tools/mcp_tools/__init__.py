"""The example tool catalogue: the MCP conformance contract, and a tour of the registration API.

``mcp_transport`` imports the ``mcp_tools`` module of every installed app at startup (as the admin
does with ``admin.py``); this package imports its modules, so everything decorated in them is
served at ``/mcp``. It has two jobs:

1. **The conformance contract.** Every tool, resource, resource template, prompt and completion
   that ``@modelcontextprotocol/conformance@0.1.16 --suite all`` calls, with the names, texts,
   schemas and MIME types of the reference servers (see conformance-server-requirements.md, §C.4,
   D.3, F, G, H). They really work: ``test_sampling`` returns the model's text and the
   elicitation tools return what the user entered.
2. **An example for users** of each part of the API: a schema from type hints and the docstring's
   ``Args:`` section (``test_sampling``), a hand-written JSON Schema (``json_schema_2020_12_tool``),
   content blocks (``test_multiple_content_types``), ``raise ToolError`` (``test_error_handling``),
   logging, progress, sampling, elicitation and stream closing through ``Context``, and the two
   benchmark tools ``echo`` and ``slow_progress``.

The conformance tools pass ``structured_output=False``: the reference servers answer them with
``content`` only, without an ``outputSchema``. ``echo`` keeps the default, so its ``-> str``
annotation gives the ``{"result": ...}`` output schema that the official Python SDK gives.
"""
# Each module registers its tools, resources and prompts as it is imported, in this order.
from . import (common, content_types, notifications, client_requests, input_schema, benchmark,  # noqa: F401
               authorization, modern_suite, resources_prompts, background, stamps, database, shared_clients)

# The 2026-07-28 era's fixtures (multi-round trips, the tasks extension) live in their own module.
from .. import modern_fixtures  # noqa: E402,F401
