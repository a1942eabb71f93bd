"""A conformance tool whose input schema is written by hand (JSON Schema 2020-12)."""
from mcp_transport import tool

from .common import _json


# --- Tools: a hand-written input schema --------------------------------------------------------

# "Serve inputSchema verbatim (no stripping of $schema, $defs, additionalProperties, $ref …)".
# Arguments are validated against it with jsonschema's Draft 2020-12 validator.
# It has the keywords the 0.2.0 suite looks for in tools/list (json-schema-2020-12: an $anchor in
# $defs, allOf/anyOf composition, if/then/else), as the reference servers' schema does.
JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {"$anchor": "addressDef", "type": "object",
                    "properties": {"street": {"type": "string"}, "city": {"type": "string"}}},
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@tool(input_schema=JSON_SCHEMA_2020_12, structured_output=False,
      description="Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)")
def json_schema_2020_12_tool(**arguments) -> str:
    return f"JSON Schema 2020-12 tool called with: {_json(arguments)}"
