"""registry: schemas from signatures and docstrings, argument binding, results; resources, prompts,
completions. Every test registers into a fresh ``Registry()``, never the global one."""
import base64
import json
from typing import Annotated, Any, Optional

import pydantic
import pytest
from typing_extensions import TypedDict  # pydantic needs typing_extensions' on Python < 3.12

from mcp_transport.methods import content
from mcp_transport.methods.content import ToolResult
from mcp_transport.methods.context import Context, SyncContext
from mcp_transport.methods.registry import ArgumentError, Registry, parse_docstring, registry as global_registry


@pytest.fixture
def reg():
    return Registry()


def only_tool(reg):
    (spec,) = reg.tools.values()
    return spec


# --- input schema ---------------------------------------------------------------------------

def test_input_schema_from_type_hints(reg):
    @reg.tool
    def f(i: int, s: str, x: float, b: bool, tags: list[str]):
        pass

    schema = only_tool(reg).input_schema
    assert schema["type"] == "object"
    props = schema["properties"]
    assert props["i"]["type"] == "integer"
    assert props["s"]["type"] == "string"
    assert props["x"]["type"] == "number"
    assert props["b"]["type"] == "boolean"
    assert props["tags"] == {"type": "array", "items": {"type": "string"}, "title": "Tags"}
    assert sorted(schema["required"]) == ["b", "i", "s", "tags", "x"]


def test_unannotated_parameter_accepts_anything(reg):
    @reg.tool
    def f(anything):
        return anything

    spec = only_tool(reg)
    assert "type" not in spec.input_schema["properties"]["anything"]
    assert spec.bind({"anything": [1, {"a": None}]}) == {"anything": [1, {"a": None}]}


def test_defaults_are_in_schema_and_not_required(reg):
    @reg.tool
    def f(a: int, b: str = "x", c: int = 3):
        pass

    schema = only_tool(reg).input_schema
    assert schema["required"] == ["a"]
    assert schema["properties"]["b"]["default"] == "x"
    assert schema["properties"]["c"]["default"] == 3


def test_no_parameters_gives_empty_object_schema(reg):
    @reg.tool
    def f():
        pass

    schema = only_tool(reg).input_schema
    assert schema["type"] == "object"
    assert schema["properties"] == {}
    assert "required" not in schema
    assert only_tool(reg).bind({}) == {}


def test_optional_parameter(reg):
    @reg.tool
    def f(n: Optional[int] = None):
        pass

    prop = only_tool(reg).input_schema["properties"]["n"]
    assert prop["anyOf"] == [{"type": "integer"}, {"type": "null"}]
    assert prop["default"] is None
    assert "required" not in only_tool(reg).input_schema
    assert only_tool(reg).bind({}) == {"n": None}
    assert only_tool(reg).bind({"n": None}) == {"n": None}
    assert only_tool(reg).bind({"n": 4}) == {"n": 4}


def test_annotated_field_constraints_and_description(reg):
    @reg.tool
    def f(count: Annotated[int, pydantic.Field(ge=0, description="How many.")]):
        pass

    spec = only_tool(reg)
    prop = spec.input_schema["properties"]["count"]
    assert prop["minimum"] == 0
    assert prop["type"] == "integer"
    # Regression: the field's description was erased (description=None) without an Args: entry.
    assert prop["description"] == "How many."
    assert spec.input_schema["required"] == ["count"]
    assert spec.bind({"count": 0}) == {"count": 0}
    with pytest.raises(ArgumentError, match=r"count: Input should be greater than or equal to 0"):
        spec.bind({"count": -1})


def test_annotated_field_with_default(reg):
    @reg.tool
    def f(n: Annotated[int, pydantic.Field(le=10)] = 5):
        pass

    prop = only_tool(reg).input_schema["properties"]["n"]
    assert prop["maximum"] == 10
    assert prop["default"] == 5
    assert only_tool(reg).bind({}) == {"n": 5}


def test_docstring_args_described(reg):
    @reg.tool
    def f(path: str, limit: int = 10, verbose: bool = False):
        """Read a file.

        Args:
            path: The file to read.
            limit (int): At most this many lines.
            verbose (bool, optional): Say more.

        Returns:
            The lines.
        """

    spec = only_tool(reg)
    props = spec.input_schema["properties"]
    assert spec.description == "Read a file."
    assert props["path"]["description"] == "The file to read."
    assert props["limit"]["description"] == "At most this many lines."
    assert props["verbose"]["description"] == "Say more."


def test_docstring_argument_description_over_several_lines(reg):
    @reg.tool
    def f(path: str, mode: str = "r"):
        """Open.

        Args:
            path: The path of the file, relative to
                the project root. See: the docs.
            mode: How to open it.
        """

    props = only_tool(reg).input_schema["properties"]
    # Regression: only the first line was kept, and "See: the docs." made a parameter "See".
    assert props["path"]["description"] == "The path of the file, relative to the project root. See: the docs."
    assert props["mode"]["description"] == "How to open it."


def test_docstring_description_wins_over_annotated_field_description(reg):
    @reg.tool
    def f(n: Annotated[int, pydantic.Field(description="from Field")]):
        """Do.

        Args:
            n: from docstring
        """

    assert only_tool(reg).input_schema["properties"]["n"]["description"] == "from docstring"


def test_multi_paragraph_description(reg):
    @reg.tool
    def f(x: int):
        """First paragraph,
        still the first.

        Second paragraph.

        Args:
            x: An x.
        """

    spec = only_tool(reg)
    assert spec.description == "First paragraph,\nstill the first.\n\nSecond paragraph."
    assert "Args" not in spec.description
    assert spec.input_schema["properties"]["x"]["description"] == "An x."


def test_docstring_without_args_section_is_all_description(reg):
    @reg.tool
    def f(x: int):
        """Only a summary."""

    spec = only_tool(reg)
    assert spec.description == "Only a summary."
    assert "description" not in spec.input_schema["properties"]["x"]


@pytest.mark.parametrize("heading", ["Args:", "Arguments:", "Parameters:"])
def test_parse_docstring_headings(heading):
    doc = f"""Summary.

    {heading}
        a (str): first
        b: second

    Raises:
        ValueError: never
    """
    assert parse_docstring(doc) == ("Summary.", {"a": "first", "b": "second"})


def test_parse_docstring_empty():
    assert parse_docstring(None) == (None, {})
    assert parse_docstring("") == (None, {})


def test_explicit_description_overrides_docstring(reg):
    @reg.tool(description="Explicit.", title="T", name="renamed")
    def f():
        """From the docstring."""

    assert list(reg.tools) == ["renamed"]
    spec = reg.tools["renamed"]
    assert spec.description == "Explicit."
    assert spec.title == "T"


# --- Context parameter ----------------------------------------------------------------------

def test_context_parameter_is_detected_and_excluded(reg):
    @reg.tool
    async def f(text: str, ctx: Context) -> str:
        return text

    spec = only_tool(reg)
    assert spec.context_param == "ctx"
    assert spec.may_send is True
    assert spec.is_async is True
    assert set(spec.input_schema["properties"]) == {"text"}
    assert spec.input_schema["required"] == ["text"]
    assert spec.bind({"text": "a"}) == {"text": "a"}


def test_context_parameter_any_name_and_subclass(reg):
    @reg.tool
    def f(reporter: SyncContext, n: int = 1):
        pass

    spec = only_tool(reg)
    assert spec.context_param == "reporter"
    assert spec.may_send is True
    assert spec.is_async is False
    assert set(spec.input_schema["properties"]) == {"n"}


def test_tool_without_context_may_not_send(reg):
    @reg.tool
    def f(n: int):
        pass

    assert only_tool(reg).context_param is None
    assert only_tool(reg).may_send is False


# --- explicit input_schema ------------------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}, "required": ["n"],
          "additionalProperties": False}


def test_explicit_input_schema_is_used_verbatim(reg):
    @reg.tool(input_schema=SCHEMA)
    def f(n):
        return n

    spec = only_tool(reg)
    assert spec.input_schema == SCHEMA
    assert spec.arguments_model is None
    assert spec.bind({"n": 2}) == {"n": 2}


@pytest.mark.parametrize("arguments, message", [
    ({}, "'n' is a required property"),
    ({"n": "2"}, "'2' is not of type 'integer'"),
    ({"n": 0}, "0 is less than the minimum of 1"),
    ({"n": 1, "extra": 1}, "Additional properties are not allowed ('extra' was unexpected)"),
])
def test_explicit_input_schema_rejects_bad_arguments(reg, arguments, message):
    @reg.tool(input_schema=SCHEMA)
    def f(n):
        return n

    with pytest.raises(ArgumentError) as info:
        only_tool(reg).bind(arguments)
    assert str(info.value) == f"Invalid arguments for tool f: {message}"


def test_explicit_input_schema_drops_arguments_the_function_does_not_take(reg):
    @reg.tool(input_schema={"type": "object"})
    def f(a, b=None):
        pass

    assert only_tool(reg).bind({"a": 1, "zzz": 2}) == {"a": 1}


def test_explicit_input_schema_with_var_keyword_passes_everything(reg):
    @reg.tool(input_schema={"type": "object"})
    def f(**kwargs):
        pass

    assert only_tool(reg).bind({"a": 1, "zzz": 2}) == {"a": 1, "zzz": 2}


# --- bind -----------------------------------------------------------------------------------

def test_bind_coerces_and_fills_defaults(reg):
    @reg.tool
    def f(n: int, ratio: float, tags: list[int], flag: bool = False):
        pass

    kwargs = only_tool(reg).bind({"n": "5", "ratio": 2, "tags": ["1", 2]})
    assert kwargs == {"n": 5, "ratio": 2.0, "tags": [1, 2], "flag": False}
    assert type(kwargs["n"]) is int and type(kwargs["ratio"]) is float


def test_bind_builds_pydantic_models(reg):
    class Point(pydantic.BaseModel):
        x: int
        y: int

    @reg.tool
    def f(p: Point):
        pass

    kwargs = only_tool(reg).bind({"p": {"x": 1, "y": "2"}})
    assert kwargs["p"] == Point(x=1, y=2)


def test_bind_ignores_unknown_arguments(reg):
    @reg.tool
    def f(n: int):
        pass

    assert only_tool(reg).bind({"n": 1, "other": 2}) == {"n": 1}


@pytest.mark.parametrize("arguments, expected", [
    ({}, "Invalid arguments for tool f: n: Field required"),
    ({"n": "abc"}, "Invalid arguments for tool f: n: Input should be a valid integer, "
                   "unable to parse string as an integer"),
    ({"n": 1, "tags": [1, "x"]}, "Invalid arguments for tool f: tags.1: Input should be a valid integer, "
                                 "unable to parse string as an integer"),
])
def test_bind_errors(reg, arguments, expected):
    @reg.tool
    def f(n: int, tags: list[int] = ()):
        pass

    with pytest.raises(ArgumentError) as info:
        only_tool(reg).bind(arguments)
    assert str(info.value) == expected


def test_bind_reports_every_bad_argument(reg):
    @reg.tool
    def f(a: int, b: str):
        pass

    with pytest.raises(ArgumentError) as info:
        only_tool(reg).bind({"a": "x"})
    assert "a: Input should be a valid integer" in str(info.value)
    assert "b: Field required" in str(info.value)


# --- output schema --------------------------------------------------------------------------

class Point(pydantic.BaseModel):
    x: int
    y: int


class Movie(TypedDict):
    title: str
    year: int


@pytest.mark.parametrize("annotation, inner", [
    (str, {"type": "string"}),
    (int, {"type": "integer"}),
    (list[int], {"type": "array", "items": {"type": "integer"}}),
    (Optional[str], {"anyOf": [{"type": "string"}, {"type": "null"}]}),
])
def test_output_schema_wraps_non_objects(reg, annotation, inner):
    def f():
        pass
    f.__annotations__["return"] = annotation
    reg.tool(f)

    spec = only_tool(reg)
    assert spec.wraps_result is True
    assert spec.output_schema == {"type": "object", "properties": {"result": inner}, "required": ["result"]}


def test_output_schema_wrapped_keeps_defs_at_top(reg):
    @reg.tool
    def f() -> list[Point]:
        pass

    schema = only_tool(reg).output_schema
    assert schema["properties"]["result"] == {"type": "array", "items": {"$ref": "#/$defs/Point"}}
    assert schema["$defs"]["Point"]["properties"] == {"x": {"title": "X", "type": "integer"},
                                                      "y": {"title": "Y", "type": "integer"}}
    assert only_tool(reg).to_result([Point(x=1, y=2)])["structuredContent"] == {"result": [{"x": 1, "y": 2}]}


def test_output_schema_base_model_not_wrapped(reg):
    @reg.tool
    def f() -> Point:
        pass

    spec = only_tool(reg)
    assert spec.wraps_result is False
    assert spec.output_schema["type"] == "object"
    assert spec.output_schema["properties"] == {"x": {"title": "X", "type": "integer"},
                                                "y": {"title": "Y", "type": "integer"}}
    assert spec.output_schema["required"] == ["x", "y"]


def test_output_schema_typed_dict_not_wrapped(reg):
    @reg.tool
    def f() -> Movie:
        pass

    spec = only_tool(reg)
    assert spec.wraps_result is False
    assert spec.output_schema["type"] == "object"
    assert set(spec.output_schema["properties"]) == {"title", "year"}


def test_output_schema_dict_str_int_not_wrapped(reg):
    @reg.tool
    def f() -> dict[str, int]:
        pass

    spec = only_tool(reg)
    assert spec.wraps_result is False
    assert spec.output_schema == {"type": "object", "additionalProperties": {"type": "integer"}}


@pytest.mark.parametrize("annotation", [None, ToolResult, Any, list, dict, list[dict], dict[str, dict]])
def test_no_output_schema(reg, annotation):
    def f():
        pass
    f.__annotations__["return"] = annotation
    reg.tool(f)

    spec = only_tool(reg)
    assert spec.output_schema is None
    assert spec.return_adapter is None


def test_no_output_schema_without_annotation(reg):
    @reg.tool
    def f():
        pass

    assert only_tool(reg).output_schema is None
    assert "outputSchema" not in only_tool(reg).describe()


def test_explicit_output_schema_wins(reg):
    schema = {"type": "object", "properties": {"result": {"type": "string", "minLength": 1}}}

    @reg.tool(output_schema=schema)
    def f() -> str:
        return "x"

    assert only_tool(reg).output_schema == schema


def test_structured_output_false(reg):
    @reg.tool(structured_output=False)
    def f() -> int:
        return 3

    spec = only_tool(reg)
    assert spec.output_schema is None
    assert spec.return_adapter is None
    assert spec.to_result(3) == {"content": [{"type": "text", "text": "3"}]}
    assert "outputSchema" not in spec.describe()


# --- to_result ------------------------------------------------------------------------------

def make(reg, annotation=None, **options):
    def f():
        pass
    if annotation is not None:
        f.__annotations__["return"] = annotation
    reg.tool(f, **options)
    return only_tool(reg)


def test_to_result_str_structured(reg):
    assert make(reg, str).to_result("hi") == {"content": [{"type": "text", "text": "hi"}],
                                              "structuredContent": {"result": "hi"}}


def test_to_result_int_structured_text_is_json(reg):
    result = make(reg, int).to_result(3)
    assert result["structuredContent"] == {"result": 3}
    assert json.loads(result["content"][0]["text"]) == {"result": 3}


def test_to_result_model(reg):
    result = make(reg, Point).to_result(Point(x=1, y=2))
    assert result["structuredContent"] == {"x": 1, "y": 2}
    assert json.loads(result["content"][0]["text"]) == {"x": 1, "y": 2}
    assert "isError" not in result


def test_to_result_model_from_dict(reg):
    assert make(reg, Point).to_result({"x": 1, "y": 2})["structuredContent"] == {"x": 1, "y": 2}


def test_to_result_unstructured(reg):
    spec = make(reg)
    assert spec.to_result("hi") == {"content": [{"type": "text", "text": "hi"}]}
    assert spec.to_result(None) == {"content": []}
    assert spec.to_result({"é": 1}) == {"content": [{"type": "text", "text": '{"é": 1}'}]}
    assert spec.to_result([]) == {"content": [{"type": "text", "text": "[]"}]}


def test_to_result_none_for_none_annotation(reg):
    assert make(reg, type(None)).to_result(None) == {"content": []}


def test_to_result_content_block(reg):
    block = content.image(b"x", "image/png")
    assert make(reg).to_result(block) == {"content": [block]}


def test_to_result_list_of_blocks(reg):
    blocks = [content.text("a"), content.resource_link("test://a", "a")]
    assert make(reg).to_result(blocks) == {"content": blocks}


def test_to_result_mixed_list_is_not_content(reg):
    result = make(reg).to_result([content.text("a"), 1])
    assert result == {"content": [{"type": "text", "text": '[{"type": "text", "text": "a"}, 1]'}]}


def test_to_result_dict_with_unhashable_type_is_data(reg):
    # Regression: is_content_block raised TypeError on {"type": [...]}.
    result = make(reg).to_result({"type": ["a"]})
    assert result == {"content": [{"type": "text", "text": '{"type": ["a"]}'}]}


def test_to_result_tool_result_wins_over_annotation(reg):
    spec = make(reg, int)
    value = ToolResult(content=[content.text("bad")], is_error=True)
    assert spec.to_result(value) == {"content": [{"type": "text", "text": "bad"}], "isError": True}


def test_to_result_value_violating_annotation_is_error(reg):
    result = make(reg, int).to_result("not a number")
    assert result["isError"] is True
    assert "structuredContent" not in result
    text = result["content"][0]["text"]
    assert text.startswith("Tool f returned output that does not match its outputSchema:")
    assert "valid integer" in text


def test_to_result_model_missing_field_is_error(reg):
    result = make(reg, Point).to_result({"x": 1})
    assert result["isError"] is True
    assert "y: Field required" in result["content"][0]["text"]


# --- describe -------------------------------------------------------------------------------

def test_describe_minimal(reg):
    @reg.tool
    def f():
        pass

    assert set(only_tool(reg).describe()) == {"name", "inputSchema"}


def test_describe_full(reg):
    @reg.tool(title="Eff", annotations={"readOnlyHint": True}, meta={"x": 1})
    def f(n: int) -> int:
        """Doc."""
        return n

    entry = only_tool(reg).describe()
    assert set(entry) == {"name", "title", "description", "inputSchema", "outputSchema", "annotations", "_meta"}
    assert entry["name"] == "f"
    assert entry["title"] == "Eff"
    assert entry["description"] == "Doc."
    assert entry["annotations"] == {"readOnlyHint": True}
    assert entry["_meta"] == {"x": 1}
    assert entry["inputSchema"]["properties"]["n"]["type"] == "integer"
    json.dumps(entry)  # serialisable as is


def test_tool_decorator_returns_function_and_leaves_global_registry_alone(reg):
    before = set(global_registry.tools)

    def f():
        return 42

    assert reg.tool(f) is f
    assert reg.tool(name="g")(f) is f
    assert set(reg.tools) == {"f", "g"}
    assert set(global_registry.tools) == before


# --- resources ------------------------------------------------------------------------------

def test_static_resource(reg):
    @reg.resource("test://static", mime_type="text/plain", title="S")
    def static():
        """A static resource."""
        return "hello"

    assert list(reg.resources) == ["test://static"]
    assert reg.templates == {}
    spec = reg.resources["test://static"]
    assert not spec.is_template
    assert spec.describe() == {"uri": "test://static", "name": "static", "title": "S",
                               "description": "A static resource.", "mimeType": "text/plain"}
    assert reg.find_resource("test://static") == (spec, {})
    assert reg.find_resource("test://static/") == (None, None)


def test_template_resource(reg):
    @reg.resource("test://template/{id}/data", name="tpl")
    def tpl(id):
        return id

    assert reg.resources == {}
    spec = reg.templates["test://template/{id}/data"]
    assert spec.is_template
    assert spec.describe() == {"uriTemplate": "test://template/{id}/data", "name": "tpl"}
    assert spec.match("test://template/123/data") == {"id": "123"}
    assert reg.find_resource("test://template/123/data") == (spec, {"id": "123"})
    for uri in ("test://template/a/b/data", "test://template//data", "test://template/123/data/x",
                "xtest://template/123/data", "test://template/123/dat"):
        assert spec.match(uri) is None, uri
        assert reg.find_resource(uri) == (None, None), uri


def test_template_special_characters_are_literal(reg):
    @reg.resource("test://a.b/{x}?q={y}")
    def r(x, y):
        pass

    spec = reg.templates["test://a.b/{x}?q={y}"]
    assert spec.match("test://a.b/1?q=2") == {"x": "1", "y": "2"}
    assert spec.match("test://aXb/1?q=2") is None


def test_static_resource_found_before_template(reg):
    @reg.resource("test://{name}")
    def tpl(name):
        pass

    @reg.resource("test://fixed")
    def fixed():
        pass

    spec, variables = reg.find_resource("test://fixed")
    assert spec.name == "fixed" and variables == {}
    spec, variables = reg.find_resource("test://other")
    assert spec.name == "tpl" and variables == {"name": "other"}


def test_to_contents(reg):
    @reg.resource("test://r", mime_type="application/json")
    def r():
        pass

    spec = reg.resources["test://r"]
    assert spec.to_contents("test://r", "text") == [{"uri": "test://r", "mimeType": "application/json",
                                                     "text": "text"}]
    assert spec.to_contents("test://r", b"\x00\xff") == [{"uri": "test://r", "mimeType": "application/json",
                                                          "blob": base64.b64encode(b"\x00\xff").decode()}]
    given = {"uri": "test://r", "text": "mine"}
    assert spec.to_contents("test://r", given) == [given]
    several = [{"uri": "test://r#1", "text": "a"}, {"uri": "test://r#2", "blob": "AA=="}]
    assert spec.to_contents("test://r", several) == several
    assert spec.to_contents("test://r", 5) == [{"uri": "test://r", "mimeType": "application/json", "text": "5"}]
    assert spec.to_contents("test://r", [1, "é"]) == [{"uri": "test://r", "mimeType": "application/json",
                                                      "text": '[1, "é"]'}]


def test_to_contents_uses_the_concrete_uri(reg):
    @reg.resource("test://t/{id}")
    def t(id):
        pass

    assert reg.templates["test://t/{id}"].to_contents("test://t/7", "x") == [{"uri": "test://t/7", "text": "x"}]


# --- prompts --------------------------------------------------------------------------------

def test_prompt_arguments_from_signature(reg):
    @reg.prompt(title="Greet")
    def greet(name, style="plain", *extra, **more):
        """Say hello.

        Args:
            name: Who to greet.
            style: How.
        """

    spec = reg.prompts["greet"]
    # Regression: *extra/**more were listed as required arguments.
    assert spec.arguments == [{"name": "name", "required": True, "description": "Who to greet."},
                              {"name": "style", "required": False, "description": "How."}]
    assert spec.describe() == {"name": "greet", "title": "Greet", "description": "Say hello.",
                               "arguments": spec.arguments}


def test_prompt_name_override_and_bare_describe(reg):
    @reg.prompt(name="p2")
    def p():
        pass

    assert reg.prompts["p2"].describe() == {"name": "p2", "arguments": []}


def test_missing_arguments(reg):
    @reg.prompt
    def p(a, b, c=None):
        pass

    spec = reg.prompts["p"]
    assert spec.missing_arguments({}) == ["a", "b"]
    assert spec.missing_arguments({"b": "1", "c": "2"}) == ["a"]
    assert spec.missing_arguments({"a": "", "b": "x"}) == []


def test_prompt_to_result(reg):
    @reg.prompt
    def p():
        """Described."""

    @reg.prompt
    def q():
        pass

    spec, bare = reg.prompts["p"], reg.prompts["q"]
    user_hi = {"role": "user", "content": {"type": "text", "text": "hi"}}
    assistant = {"role": "assistant", "content": {"type": "text", "text": "yo"}}
    assert spec.to_result("hi") == {"messages": [user_hi], "description": "Described."}
    assert bare.to_result("hi") == {"messages": [user_hi]}
    assert bare.to_result(["hi", "hi"]) == {"messages": [user_hi, user_hi]}
    assert bare.to_result([assistant, "hi"]) == {"messages": [assistant, user_hi]}
    given = {"messages": [assistant], "description": "own"}
    assert spec.to_result(given) == given
    assert spec.to_result({"messages": [assistant]}) == {"messages": [assistant], "description": "Described."}


def test_prompt_to_result_does_not_mutate_the_returned_dict(reg):
    @reg.prompt
    def p():
        """Described."""

    value = {"messages": []}
    reg.prompts["p"].to_result(value)
    assert value == {"messages": []}


# --- completions ----------------------------------------------------------------------------

def test_completion_keys(reg):
    @reg.completion(prompt="greet")
    def for_prompt(argument, value, context):
        return []

    @reg.completion(resource_template="test://t/{id}")
    def for_template(argument, value, context):
        return []

    assert reg.completers == {("ref/prompt", "greet"): for_prompt,
                              ("ref/resource", "test://t/{id}"): for_template}
