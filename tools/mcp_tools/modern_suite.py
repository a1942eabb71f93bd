"""The tools the 0.2.0 conformance suite calls in the 2026-07-28 era (server-stateless,
http-custom-header-...); its multi-round-trip and tasks fixtures are in ``tools/modern_fixtures.py``.
"""
from typing import Annotated

from pydantic import Field

from mcp_transport import Context, tool
from mcp_transport.methods.notify import list_changed
from mcp_transport.protocol.modern import MissingClientCapability

from .client_requests import CONTACT_SCHEMA, _elicit
from .common import _json
from .notifications import test_tool_with_logging


# --- Tools: the 2026-07-28 fixtures of the 0.2.0 suite (server-stateless, http-custom-header-...) --

@tool(structured_output=False)
def test_x_mcp_header(
    region: Annotated[str, Field(description="Mirrored into the Mcp-Param-Region header",
                                 json_schema_extra={"x-mcp-header": "Region"})] = "<none>",
) -> str:
    """Tests SEP-2243 Mcp-Param-* server-side validation (a parameter marked x-mcp-header)"""
    # A 2026-07-28 request must repeat arguments.region in Mcp-Param-Region (protocol/modern.py).
    return f"region={region}"


@tool(structured_output=False)
async def test_missing_capability(ctx: Context) -> str:
    """Tests the MissingRequiredClientCapabilityError of a client that did not declare sampling"""
    # "If processing a request requires a capability the client did not include in
    # io.modelcontextprotocol/clientCapabilities, the server MUST return" -32021 (HTTP 400).
    if "sampling" not in ctx.client_capabilities:
        raise MissingClientCapability("This tool needs the client's sampling capability.", {"sampling": {}})
    return "The client declared sampling."


@tool(structured_output=False)
async def test_trigger_tool_change() -> str:
    """Announces a change of the tool list to subscriptions/listen streams (and legacy GET streams)"""
    await list_changed("tools")
    return "tool list changed"


@tool(structured_output=False)
async def test_trigger_prompt_change() -> str:
    """Announces a change of the prompt list to subscriptions/listen streams (and legacy GET streams)"""
    await list_changed("prompts")
    return "prompt list changed"


# server-stateless calls these names: without a logLevel in _meta the logs must not be sent, and
# an elicitation must never go out as a request on the response stream.
tool(name="test_logging_tool", structured_output=False)(test_tool_with_logging)


@tool(structured_output=False)
async def test_streaming_elicitation(ctx: Context) -> str:
    """Tests an elicitation during a call (never a server-to-client request in 2026-07-28)"""
    action, answered = await _elicit(ctx, "Please provide your information", CONTACT_SCHEMA)
    return f"User response: action={action}, content={_json(answered)}"
