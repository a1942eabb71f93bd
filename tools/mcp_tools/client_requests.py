"""Conformance tools that ask the client: sampling, and elicitation (with the schemas of SEP-1034
and SEP-1330).
"""
import jsonschema

from mcp_transport import ClientCapabilityError, Context, ToolError, tool

from .common import _json


# --- Tools: requests to the client (sampling, elicitation) -----------------------------------

def _reply_text(message: dict) -> str:
    """The text of a CreateMessageResult, whose content is one block or (with tools) a list."""
    blocks = message.get("content")
    blocks = blocks if isinstance(blocks, list) else [blocks]
    texts = [block["text"] for block in blocks if isinstance(block, dict) and block.get("type") == "text"]
    if not texts:
        raise ToolError("The model's reply has no text content.")
    return "\n".join(texts)


@tool(structured_output=False)
async def test_sampling(prompt: str, ctx: Context) -> str:
    """Tests server-initiated sampling (LLM completion request)

    Args:
        prompt: The prompt to send to the LLM
    """
    try:
        reply = await ctx.sample([prompt], max_tokens=100)
    except ClientCapabilityError as exc:
        # "If the client lacks sampling, return isError text."
        raise ToolError(f"Sampling is not available: {exc}") from None
    return f"LLM response: {_reply_text(reply)}"


async def _elicit(ctx: Context, message: str, schema: dict) -> tuple:
    """(action, content) of an elicitation/create; accepted content is checked against the schema."""
    try:
        answer = await ctx.elicit(message, schema)
    except ClientCapabilityError as exc:
        raise ToolError(f"Elicitation is not available: {exc}") from None
    answered = answer.get("content") or {}
    if answer.get("action") == "accept":
        # "Servers SHOULD validate elicitation responses against the requested schema."
        try:
            jsonschema.validate(answered, schema, cls=jsonschema.Draft202012Validator)
        except jsonschema.ValidationError as exc:
            raise ToolError(f"The user's answer does not match the requested schema: {exc.message}") from None
    return answer.get("action"), answered


# "Use exactly this schema" -- the harness answers {"username": ..., "email": ...}.
CONTACT_SCHEMA = {
    "type": "object",
    "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    },
    "required": ["username", "email"],
}


@tool(structured_output=False)
async def test_elicitation(message: str, ctx: Context) -> str:
    """Tests server-initiated elicitation (user input request)

    Args:
        message: The message to show the user
    """
    action, answered = await _elicit(ctx, message, CONTACT_SCHEMA)
    return f"User response: action={action}, content={_json(answered)}"


# SEP-1034: "each property's type and exact default; status.enum is an array containing the
# default. age must be "integer", not "number", and score "number"".
DEFAULTS_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"],
                   "default": "active"},
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
    "required": [],
}


@tool(structured_output=False)
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Tests elicitation with default values per SEP-1034"""
    action, answered = await _elicit(ctx, "Please review and update the form fields with defaults",
                                     DEFAULTS_SCHEMA)
    return f"Elicitation completed: action={action}, content={_json(answered)}"


def _titled(*pairs) -> list:
    return [{"const": value, "title": title} for value, title in pairs]


# SEP-1330: the five enum shapes, "5 checks, one per property".
ENUMS_SCHEMA = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "description": "Select one option",
                           "enum": ["option1", "option2", "option3"]},
        "titledSingle": {"type": "string", "description": "Select one option with titles",
                         "oneOf": _titled(("value1", "First Option"), ("value2", "Second Option"),
                                          ("value3", "Third Option"))},
        "legacyEnum": {"type": "string", "description": "Select one option (legacy)",
                       "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
        "untitledMulti": {"type": "array", "description": "Select multiple options", "minItems": 1, "maxItems": 3,
                          "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
        "titledMulti": {"type": "array", "description": "Select multiple options with titles", "minItems": 1,
                        "maxItems": 3,
                        "items": {"anyOf": _titled(("value1", "First Choice"), ("value2", "Second Choice"),
                                                   ("value3", "Third Choice"))}},
    },
    "required": [],
}


@tool(structured_output=False)
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Tests elicitation with enum schema improvements per SEP-1330"""
    action, answered = await _elicit(ctx, "Please select options from the enum fields", ENUMS_SCHEMA)
    return f"Elicitation completed: action={action}, content={_json(answered)}"
