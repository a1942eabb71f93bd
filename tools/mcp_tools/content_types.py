"""Conformance tools: each kind of content a tool's result may hold, and an error result."""
from mcp_transport import ToolError, tool
from mcp_transport.methods import content

from .common import PNG_1X1, WAV_TONE, _json


# --- Tools: content types --------------------------------------------------------------------

@tool(structured_output=False)
def test_simple_text() -> str:
    """Tests simple text content response"""
    # "tools/call test_simple_text with no `arguments` key": no parameters, so {} is fine.
    return "This is a simple text response for testing."


@tool
def test_image_content() -> dict:
    """Tests image content response"""
    return content.image(PNG_1X1, "image/png")


@tool
def test_audio_content() -> dict:
    """Tests audio content response"""
    # "mimeType must be exactly `audio/wav`"
    return content.audio(WAV_TONE, "audio/wav")


@tool
def test_embedded_resource() -> dict:
    """Tests embedded resource content response"""
    return content.embedded_resource("test://embedded-resource", "This is an embedded resource content.",
                                     "text/plain")


@tool
def test_multiple_content_types() -> list:
    """Tests response with multiple content types (text, image, resource)"""
    return [
        content.text("Multiple content types test:"),
        content.image(PNG_1X1, "image/png"),
        content.embedded_resource("test://mixed-content-resource", _json({"test": "data", "value": 123}),
                                  "application/json"),
    ]


@tool
def test_error_handling() -> None:
    """Tests error response handling"""
    # "A tool that raises → a result with isError:true and a text item, not a JSON-RPC error"
    raise ToolError("This tool intentionally returns an error for testing")
