"""Conformance resources, a resource template, prompts and completions."""
from mcp_transport import completion, prompt, resource
from mcp_transport.methods import content

from .common import PNG_1X1, _json


# --- Resources -------------------------------------------------------------------------------

@resource("test://static-text", name="static-text", title="Static Text Resource", mime_type="text/plain")
def static_text() -> str:
    """A static text resource for testing"""
    return "This is the content of the static text resource."


@resource("test://static-binary", name="static-binary", title="Static Binary Resource", mime_type="image/png")
def static_binary() -> bytes:
    """A static binary resource (image) for testing"""
    return PNG_1X1  # bytes become a base64 "blob"


@resource("test://template/{id}/data", name="template", title="Resource Template", mime_type="application/json")
def template_data(id: str) -> str:
    """A resource template with parameter substitution"""
    # For test://template/123/data: "uri, and text containing 123" (RFC 6570 level 1).
    return _json({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


WATCHED_RESOURCE_TEXT = "Watched resource content"


@resource("test://watched-resource", name="watched-resource", title="Watched Resource", mime_type="text/plain")
def watched_resource() -> str:
    """A resource that clients can subscribe to for update notifications"""
    return WATCHED_RESOURCE_TEXT


# --- Prompts ---------------------------------------------------------------------------------

@prompt(title="Simple Test Prompt")
def test_simple_prompt() -> str:
    """A simple prompt without arguments"""
    return "This is a simple prompt for testing."  # a str becomes one user text message


@prompt(title="Prompt With Arguments")
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with required arguments

    Args:
        arg1: First test argument
        arg2: Second test argument
    """
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@prompt(title="Prompt With Embedded Resource")
def test_prompt_with_embedded_resource(resourceUri: str) -> list:  # noqa: N803 (the wire name)
    """A prompt that includes an embedded resource

    Args:
        resourceUri: URI of the resource to embed
    """
    return [
        {"role": "user",
         "content": content.embedded_resource(resourceUri, "Embedded resource content for testing.", "text/plain")},
        "Please process the embedded resource above.",
    ]


@prompt(title="Prompt With Image")
def test_prompt_with_image() -> list:
    """A prompt that includes image content"""
    return [
        {"role": "user", "content": content.image(PNG_1X1, "image/png")},
        "Please analyze the image above.",
    ]


# --- Completions -----------------------------------------------------------------------------

PROMPT_SUGGESTIONS = {
    "arg1": ["testValue1", "paris", "park", "party"],
    "arg2": ["testValue2", "london", "lisbon", "lyon"],
}


def _starting_with(candidates, value: str) -> list:
    return [c for c in candidates if c.lower().startswith(value.lower())]


@completion(prompt="test_prompt_with_arguments")
def complete_prompt_arguments(argument: str, value: str, context_arguments: dict) -> list:
    """Suggestions for arg1/arg2: "values must be an array of ≤ 100 strings and may be empty"."""
    return _starting_with(PROMPT_SUGGESTIONS.get(argument, []), value)


@completion(resource_template="test://template/{id}/data")
def complete_template_id(argument: str, value: str, context_arguments: dict) -> list:
    """Suggestions for the template's ``{id}``."""
    return _starting_with(["1", "2", "3", "42", "123"], value) if argument == "id" else []
