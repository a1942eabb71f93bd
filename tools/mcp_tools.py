"""The example tool catalogue: the MCP conformance contract, and a tour of the registration API.

``mcp_transport`` imports the ``mcp_tools`` module of every installed app at startup (as the admin
does with ``admin.py``), so everything decorated here is served at ``/mcp``. The file has two jobs:

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
import asyncio
import io
import json
import logging
import math
import struct
import time
import wave
import zlib

from typing import Annotated

import jsonschema
from celery.exceptions import SoftTimeLimitExceeded
from django.core.cache import cache
from pydantic import Field

from mcp_transport import ClientCapabilityError, Context, ToolError, completion, prompt, resource, task_tool, tool
from mcp_transport.methods import content

from mcp_transport.methods.notify import list_changed
from mcp_transport.protocol.modern import MissingClientCapability

from .bounds import CounterName, IntervalMs, Seconds, Steps, counter_key
from .tasks import word_count

# The logger name the reference servers put on their notifications/message.
LOGGER = "conformance-test-server"


def _json(value) -> str:
    """Compact JSON, as JavaScript's ``JSON.stringify`` writes it in the reference texts."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# --- Sample media, built at import time with the stdlib -----------------------------------------

def _png_pixel(rgba=(255, 0, 0, 255)) -> bytes:
    """A 1x1 RGBA PNG, red by default (the reference servers' ``PNG_1x1`` is the same red pixel)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0)  # width, height, 8 bits, RGBA, defaults
    pixels = zlib.compress(b"\x00" + bytes(rgba), 9)        # one scanline: filter 0, then the pixel
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def _wav_tone(hz: int = 440, seconds: float = 0.1, rate: int = 8000) -> bytes:
    """A short 16-bit mono PCM sine tone as a complete WAV file.

    The references' ``WAV_MIN`` declares 2 bytes of samples but ends before them; this one is whole.
    """
    samples = (round(8000 * math.sin(2 * math.pi * hz * n / rate)) for n in range(int(rate * seconds)))
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(b"".join(struct.pack("<h", s) for s in samples))
    return buffer.getvalue()


PNG_1X1 = _png_pixel()
WAV_TONE = _wav_tone()


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


# --- Tools: notifications while running (these answer over SSE) ------------------------------

@tool(structured_output=False)
async def test_tool_with_logging(ctx: Context) -> str:
    """Tests tool that emits log messages during execution"""
    # "send 3 notifications/message at level info ... ~50 ms apart"; ctx.log applies the
    # level the client chose with logging/setLevel.
    await ctx.info("Tool execution started", LOGGER)
    await asyncio.sleep(0.05)
    await ctx.info("Tool processing data", LOGGER)
    await asyncio.sleep(0.05)
    await ctx.info("Tool execution completed", LOGGER)
    return "Tool with logging executed successfully"


@tool(structured_output=False)
async def test_tool_with_progress(ctx: Context) -> str:
    """Tests tool that reports progress notifications"""
    # "≥ 3 notifications, non-decreasing progress, the exact token echoed"; without a
    # progressToken, report_progress sends nothing and the tool just sleeps.
    for step in (0, 50, 100):
        if step:
            await asyncio.sleep(0.05)
        await ctx.report_progress(step, 100, f"Completed step {step} of 100")
    if ctx.progress_token is None:
        return "No progress token was given, so no progress was reported"
    return str(ctx.progress_token)


@tool(structured_output=False,
      description="Tests SSE stream disconnection and client reconnection (SEP-1699). The server closes "
                  "the stream mid-call and sends the result after the client reconnects.")
async def test_reconnection(ctx: Context) -> str:
    # "close that SSE response while the call is still running; after ~100–200 ms finish";
    # the client then gets the result by GET with Last-Event-ID.
    await ctx.info("Before disconnect", LOGGER)
    await ctx.close_stream()
    await asyncio.sleep(0.2)
    await ctx.info("After reconnect", LOGGER)
    return ("Reconnection test completed successfully. If you received this, "
            "the client properly reconnected after stream closure.")


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


# --- Tools: the benchmark pair (same as the SDK anchor in bench/server_sdk.py) -----------------
# Both are coroutines, as the anchor's are; a sync tool works the same and costs one hop to a
# worker thread per call (see client_roots below, and bench/RESULTS.md).

@tool(annotations={"readOnlyHint": True, "openWorldHint": False})
async def echo(text: str) -> str:
    """Return text unchanged.

    Args:
        text: The text to return.
    """
    return text


@tool
async def slow_progress(steps: Steps = 100, interval_ms: IntervalMs = 100, ctx: Context = None) -> str:
    """Sleep `steps` times `interval_ms`, reporting progress after each step.

    Args:
        steps: How many steps to run (0 to 100000).
        interval_ms: Milliseconds to sleep before each step (0 to 10000).
    """
    for i in range(1, steps + 1):
        await asyncio.sleep(interval_ms / 1000)
        ctx.check_cancelled()  # stop at notifications/cancelled; a dropped stream is not a cancel
        await ctx.report_progress(i, steps, f"step {i}")
    return f"done {steps}"


@tool(structured_output=False)
def whoami(ctx: Context) -> str:
    """The caller's username ("anonymous" without one): ``ctx.user`` is the request's Django user."""
    return ctx.user.get_username() if ctx.user is not None and ctx.user.is_authenticated else "anonymous"


# --- Per-tool authorization: absent from the lists, and refused, for callers who may not use them --

@tool(scopes=["reports"], structured_output=False)
def sales_report(day: str) -> str:
    """A report that needs a token with the "reports" scope (others get 403 insufficient_scope).

    Args:
        day: The day, YYYY-MM-DD.
    """
    return f"Sales on {day}: 42."


@tool(background=True, permission="auth.view_user", structured_output=False)
def count_users(ctx: Context) -> str:
    """How many users there are, counted in a worker; for users with the auth.view_user permission."""
    from django.contrib.auth import get_user_model

    return f"{get_user_model().objects.count()} users"


@resource("users://directory", mime_type="text/plain", permission="auth.view_user")
def user_directory() -> str:
    """The usernames, for users with the auth.view_user permission."""
    from django.contrib.auth import get_user_model

    return "\n".join(get_user_model().objects.order_by("username").values_list("username", flat=True))


@prompt(scopes=["reports"])
def report_summary(day: str) -> str:
    """Ask for a summary of a day's report (tokens with the "reports" scope)."""
    return f"Summarize the sales report of {day}."


@tool
def client_roots(ctx: Context) -> list[str]:
    """List the client's roots (roots/list, a server-to-client request from a sync tool)."""
    return [root["uri"] for root in ctx.list_roots()]


@tool
def server_log(text: str) -> str:
    """Write text to the server's own log (Python logging), not to the client.

    Args:
        text: The line to log; the record carries the MCP session and request ids.
    """
    logging.getLogger("tools").warning("%s", text)
    return "logged"


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


# --- Background tools: a Celery worker runs them (mcp_transport/running/jobs.py) ------------------------

@tool(background=True)
def slow_job(steps: Steps, interval_ms: IntervalMs, ctx: Context) -> str:
    """Sleep `steps` times `interval_ms` in a worker, reporting progress after each step.

    Args:
        steps: How many steps to run (0 to 100000).
        interval_ms: Milliseconds to sleep before each step (0 to 10000).
    """
    for i in range(1, steps + 1):
        time.sleep(interval_ms / 1000)
        ctx.check_cancelled()  # notifications/cancelled, tasks/cancel or the admin's cancel
        ctx.report_progress(i, steps, f"step {i}")
    return f"done {steps}"


@tool(background=True, structured_output=False)
def whoami_job(ctx: Context) -> str:
    """The caller's username, from a Celery worker (``ctx.user`` is the Django user there too)."""
    return ctx.user.get_username() if ctx.user is not None and ctx.user.is_authenticated else "anonymous"


# The background tool of docs/testing.md, verbatim (tests/integration/test_testing_kit.py checks).
@tool(background=True)
def export_report(rows: Annotated[int, Field(ge=0, le=10_000)], ctx: Context,
                  delay: Annotated[float, Field(ge=0, le=1)] = 0.05) -> str:
    """Export `rows` rows in a worker, reporting progress after each one.

    Args:
        rows: How many rows to export.
        delay: Seconds each row takes.
    """
    for row in range(1, rows + 1):
        time.sleep(delay)
        ctx.report_progress(row, rows, f"row {row}")
    return f"exported {rows} rows"


@tool(background=True, structured_output=False)
def confirm_job(question: str, ctx: Context) -> str:
    """Ask the user a yes/no question from a worker (elicitation), then answer with the choice.

    Args:
        question: What to ask.
    """
    schema = {"type": "object", "properties": {"confirm": {"type": "boolean", "title": "Confirm"}},
              "required": ["confirm"]}
    answer = ctx.elicit(question, schema)
    if answer.get("action") != "accept":
        return f"The user chose to {answer.get('action')}."
    return "confirmed" if (answer.get("content") or {}).get("confirm") else "declined"


def _tick(key: CounterName, steps: Steps, interval_ms: IntervalMs, ctx: Context) -> int:
    """Count to `steps` in the counter `key`, one per interval (a visible side effect).

    Args:
        key: The name of the counter (its cache key is bounds.counter_key(key)).
        steps: How many ticks.
        interval_ms: Milliseconds between ticks.
    """
    for i in range(1, steps + 1):
        time.sleep(interval_ms / 1000)
        ctx.check_cancelled()
        cache.set(counter_key(key), i, timeout=600)
        ctx.report_progress(i, steps)
    return steps


# Not idempotent: a lost worker gives an error result. Idempotent: the job runs again.
tool(name="tick_job", background=True)(_tick)
tool(name="tick_job_idempotent", background={"max_retries": 2}, annotations={"idempotentHint": True})(_tick)


@tool(background={"soft_time_limit": 1, "time_limit": 30}, structured_output=False)
def soft_limited_job(seconds: Seconds) -> str:
    """Sleep past a 1 s soft time limit (Celery raises SoftTimeLimitExceeded in the tool).

    Args:
        seconds: How long to sleep.
    """
    time.sleep(seconds)
    return "slept"


@tool(background={"soft_time_limit": 1, "time_limit": 2}, structured_output=False)
def hard_limited_job(seconds: Seconds) -> str:
    """Ignore the 1 s soft time limit until Celery's 2 s hard limit stops the process.

    Args:
        seconds: How long to keep sleeping.
    """
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            time.sleep(0.05)
        except SoftTimeLimitExceeded:
            pass
    return "outlived the limit"


@tool(background=True, structured_output=False)
def blocking_job(seconds: Seconds, ctx: Context) -> str:
    """Say that it started, then sleep `seconds` in one call without ever looking at
    ``ctx.cancelled``: a tool blocked in a C call, which only its worker can stop.

    Args:
        seconds: How long to sleep.
    """
    ctx.report_progress(0, 1, "started")
    time.sleep(seconds)
    return f"slept {seconds} s"


@tool(background=True, task_support="required", structured_output=False)
def report_job(rows: Steps, ctx: Context) -> str:
    """A report that can only be requested as an MCP task (execution.taskSupport "required").

    Args:
        rows: How many rows to produce.
    """
    for i in range(1, rows + 1):
        ctx.report_progress(i, rows)
    return f"{rows} rows"


task_tool(word_count)


# --- Benchmark tools (bench/jobs.py): progress messages carry the wall-clock time they were sent ---

@tool(background=True, structured_output=False)
def stamp_job(steps: Steps, interval_ms: IntervalMs, ctx: Context) -> str:
    """Report progress `steps` times in a worker, each message the time.time() it was reported at.

    Args:
        steps: How many progress notifications.
        interval_ms: Milliseconds to sleep before each one.
    """
    for i in range(1, steps + 1):
        if interval_ms > 0:
            time.sleep(interval_ms / 1000)
        ctx.report_progress(i, steps, repr(time.time()))
    return f"done {steps}"


@tool(structured_output=False)
async def stamp_inline(steps: Steps, interval_ms: IntervalMs, ctx: Context) -> str:
    """stamp_job's twin run inline in the web process (the baseline for bench/jobs.py).

    Args:
        steps: How many progress notifications.
        interval_ms: Milliseconds to sleep before each one.
    """
    for i in range(1, steps + 1):
        await asyncio.sleep(interval_ms / 1000)
        await ctx.report_progress(i, steps, repr(time.time()))
    return f"done {steps}"


# The 2026-07-28 era's fixtures (multi-round trips, the tasks extension) live in their own module.
from . import modern_fixtures  # noqa: E402,F401
