"""Content blocks and tool results, as plain dicts in MCP's wire shape (spec 2025-11-25 schema).

    return [content.text("hi"), content.image(png_bytes, "image/png")]
    return content.ToolResult(content=[content.text("failed")], is_error=True)
"""
import base64
from dataclasses import dataclass, field
from typing import Any, Optional

CONTENT_TYPES = frozenset({"text", "image", "audio", "resource", "resource_link"})


def _b64(data) -> str:
    return data if isinstance(data, str) else base64.b64encode(data).decode("ascii")


def text(value: str, **extra) -> dict:
    return {"type": "text", "text": value, **extra}


def image(data, mime_type: str, **extra) -> dict:
    """``data`` is bytes, or a str already base64-encoded."""
    return {"type": "image", "data": _b64(data), "mimeType": mime_type, **extra}


def audio(data, mime_type: str, **extra) -> dict:
    return {"type": "audio", "data": _b64(data), "mimeType": mime_type, **extra}


def resource_contents(uri: str, value, mime_type: Optional[str] = None) -> dict:
    """One entry of ``resources/read``'s ``contents``: str becomes ``text``, bytes ``blob``."""
    contents = {"uri": uri}
    if mime_type:
        contents["mimeType"] = mime_type
    if isinstance(value, (bytes, bytearray)):
        contents["blob"] = _b64(bytes(value))
    else:
        contents["text"] = value
    return contents


def embedded_resource(uri: str, value, mime_type: Optional[str] = None, **extra) -> dict:
    return {"type": "resource", "resource": resource_contents(uri, value, mime_type), **extra}


def resource_link(uri: str, name: str, **extra) -> dict:
    return {"type": "resource_link", "uri": uri, "name": name, **extra}


def is_content_block(value: Any) -> bool:
    # isinstance first: a tool may return any dict, and {"type": [...]} is unhashable.
    return isinstance(value, dict) and isinstance(value.get("type"), str) and value["type"] in CONTENT_TYPES


@dataclass
class ToolResult:
    """A full ``CallToolResult``, for tools that want to set every field themselves."""

    content: list = field(default_factory=list)
    structured_content: Optional[dict] = None
    is_error: bool = False

    def to_dict(self) -> dict:
        result = {"content": list(self.content)}
        if self.structured_content is not None:
            result["structuredContent"] = self.structured_content
        if self.is_error:
            result["isError"] = True
        return result


def error_result(message: str) -> dict:
    """"Tool Execution Errors: Reported in tool results with isError: true" -- spec 2025-11-25
    server/tools; these include input validation errors (SEP-1303)."""
    return {"content": [text(message)], "isError": True}
