"""content: the wire shape of each content helper, ToolResult and error_result."""
import base64

import pytest

from mcp_transport.methods import content

PNG = b"\x89PNG\r\n\x1a\n\x00\x01\xff"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def test_text():
    assert content.text("hi") == {"type": "text", "text": "hi"}


def test_text_extra_fields_are_merged():
    block = content.text("hi", annotations={"audience": ["user"]}, _meta={"k": 1})
    assert block == {"type": "text", "text": "hi", "annotations": {"audience": ["user"]}, "_meta": {"k": 1}}


@pytest.mark.parametrize("helper, kind", [(content.image, "image"), (content.audio, "audio")])
def test_binary_blocks_base64_encode_bytes(helper, kind):
    block = helper(PNG, "application/octet-stream")
    assert block == {"type": kind, "data": b64(PNG), "mimeType": "application/octet-stream"}
    assert base64.b64decode(block["data"]) == PNG


@pytest.mark.parametrize("helper, kind", [(content.image, "image"), (content.audio, "audio")])
def test_binary_blocks_pass_str_through(helper, kind):
    already = b64(PNG)
    block = helper(already, "image/png")
    assert block["data"] == already  # not encoded a second time
    assert block["type"] == kind


def test_image_extra_fields():
    assert content.image(b"x", "image/png", annotations={"priority": 1})["annotations"] == {"priority": 1}


def test_resource_contents_text():
    assert content.resource_contents("test://a", "hello", "text/plain") == \
        {"uri": "test://a", "mimeType": "text/plain", "text": "hello"}


def test_resource_contents_without_mime_type_has_no_mime_key():
    assert content.resource_contents("test://a", "hello") == {"uri": "test://a", "text": "hello"}


@pytest.mark.parametrize("value", [PNG, bytearray(PNG)])
def test_resource_contents_bytes_become_blob(value):
    contents = content.resource_contents("test://b", value, "image/png")
    assert contents == {"uri": "test://b", "mimeType": "image/png", "blob": b64(PNG)}
    assert "text" not in contents


def test_embedded_resource():
    assert content.embedded_resource("test://a", "hi", "text/plain", annotations={"priority": 0.5}) == {
        "type": "resource",
        "resource": {"uri": "test://a", "mimeType": "text/plain", "text": "hi"},
        "annotations": {"priority": 0.5},
    }


def test_embedded_resource_blob():
    assert content.embedded_resource("test://b", b"\x00\x01")["resource"] == {"uri": "test://b", "blob": "AAE="}


def test_resource_link():
    assert content.resource_link("test://a", "a", mimeType="text/plain") == \
        {"type": "resource_link", "uri": "test://a", "name": "a", "mimeType": "text/plain"}


@pytest.mark.parametrize("block", [
    content.text("x"),
    content.image(b"x", "image/png"),
    content.audio(b"x", "audio/wav"),
    content.embedded_resource("test://a", "x"),
    content.resource_link("test://a", "a"),
])
def test_is_content_block_true_for_every_helper(block):
    assert content.is_content_block(block)


@pytest.mark.parametrize("value", [
    {"type": "bogus", "text": "x"},
    {"text": "x"},
    {},
    "text",
    ["type", "text"],
    None,
    {"type": None},
    {"type": ["text"]},  # unhashable: once raised TypeError
    {"type": {"text": 1}},
])
def test_is_content_block_false(value):
    assert not content.is_content_block(value)


def test_tool_result_defaults():
    assert content.ToolResult().to_dict() == {"content": []}


def test_tool_result_all_fields():
    result = content.ToolResult(content=[content.text("no")], structured_content={"ok": False}, is_error=True)
    assert result.to_dict() == {"content": [{"type": "text", "text": "no"}], "structuredContent": {"ok": False},
                                "isError": True}


def test_tool_result_empty_structured_content_is_kept():
    # {} is a value (an object with no properties), only None means "absent".
    assert content.ToolResult(structured_content={}).to_dict() == {"content": [], "structuredContent": {}}


def test_tool_result_is_error_false_is_omitted():
    assert "isError" not in content.ToolResult(content=[content.text("x")]).to_dict()


def test_tool_result_to_dict_copies_content_list():
    blocks = [content.text("a")]
    result = content.ToolResult(content=blocks).to_dict()
    result["content"].append(content.text("b"))
    assert blocks == [content.text("a")]


def test_error_result():
    assert content.error_result("boom") == {"content": [{"type": "text", "text": "boom"}], "isError": True}
