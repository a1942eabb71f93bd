"""Fixtures the 0.2.0 conformance harness calls in the 2026-07-28 era: multi-round-trip requests
(SEP-2322, ``input-required-result-*``) and the tasks extension (SEP-2663, ``tasks-*``). Names,
keys and texts are the ones the scenario sources in
``@modelcontextprotocol/conformance`` ask for. Every question goes through ``Context.elicit``,
``sample`` or ``list_roots``, as it would in the 2025-11-25 era.
"""
import asyncio
import time

from mcp_transport import Context, ToolError, prompt, resource, tool

from .bounds import CounterName, IntervalMs, Seconds, Steps, counter_key

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def _content(answer: dict) -> dict:
    return answer.get("content") or {} if isinstance(answer, dict) else {}


def _sampled_text(answer: dict) -> str:
    content = answer.get("content") if isinstance(answer, dict) else None
    return content.get("text", "") if isinstance(content, dict) else ""


# -- input-required-result-* (inline tools: replayed each round) --------------------------------

@tool(structured_output=False)
async def test_input_required_result_elicitation(ctx: Context) -> str:
    """Ask the user's name (inputRequests key "user_name"), then greet them. The name guards
    nothing, so the question takes a name given ahead (input-required-result-ignore-extra-params
    sends it on its first call)."""
    answer = await ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name", answerable_ahead=True)
    return f"Hello, {_content(answer).get('name', 'stranger')}!"


@tool(structured_output=False)
async def test_input_required_result_sampling(ctx: Context) -> str:
    """Ask the client's model for the capital of France (key "capital_question")."""
    answer = await ctx.sample(["What is the capital of France?"], max_tokens=100, key="capital_question")
    return f"The model said: {_sampled_text(answer)}"


@tool(structured_output=False)
async def test_input_required_result_list_roots(ctx: Context) -> str:
    """Ask the client's roots (key "client_roots") and name them."""
    roots = await ctx.list_roots(key="client_roots")
    return "Roots: " + ", ".join(root.get("uri", "?") for root in roots)


@tool(structured_output=False)
async def test_input_required_result_request_state(ctx: Context) -> str:
    """Ask for a confirmation (key "confirm"); the retry's requestState is verified before it runs."""
    answer = await ctx.elicit("Please confirm", {"type": "object", "properties": {"ok": {"type": "boolean"}},
                                                 "required": ["ok"]}, key="confirm")
    return f"state-ok: confirmed={_content(answer).get('ok')}"


@tool(structured_output=False)
async def test_input_required_result_multiple_inputs(ctx: Context) -> str:
    """Ask three things at once: a name, a sampled greeting and the roots."""
    name, greeting, roots = await asyncio.gather(
        ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name"),
        ctx.sample(["Generate a greeting"], max_tokens=50, key="greeting"),
        ctx.list_roots(key="client_roots"))
    return f"{_sampled_text(greeting)} {_content(name).get('name')} ({len(roots)} roots)"


@tool(structured_output=False)
async def test_input_required_result_multi_round(ctx: Context) -> str:
    """Two rounds: a name (key "step1"), then a favourite colour (key "step2")."""
    name = await ctx.elicit("Step 1: What is your name?", NAME_SCHEMA, key="step1")
    color = await ctx.elicit("Step 2: What is your favorite color?",
                             {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]},
                             key="step2")
    return f"{_content(name).get('name')} likes {_content(color).get('color')}"


@tool(structured_output=False)
async def test_input_required_result_tampered_state(ctx: Context) -> str:
    """Ask for a confirmation; a retry whose requestState was altered gets -32602."""
    answer = await ctx.elicit("Please confirm", {"type": "object", "properties": {"ok": {"type": "boolean"}}},
                              key="confirm")
    return f"confirmed={_content(answer).get('ok')}"


@tool(structured_output=False)
async def test_input_required_result_capabilities(ctx: Context) -> str:
    """Ask only what the request's clientCapabilities allow (sampling and/or elicitation)."""
    questions = []
    if "sampling" in ctx.client_capabilities:
        questions.append(ctx.sample(["Say something"], max_tokens=20, key="sampling_question"))
    if "elicitation" in ctx.client_capabilities:
        questions.append(ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name"))
    answers = await asyncio.gather(*questions)
    return f"{len(answers)} answers"


@prompt(title="Prompt That Asks First")
async def test_input_required_result_prompt(ctx: Context) -> str:
    """A prompt that asks the user for its context (key "user_context") before it is built."""
    answer = await ctx.elicit("What context should the prompt use?",
                              {"type": "object", "properties": {"context": {"type": "string"}},
                               "required": ["context"]}, key="user_context")
    return f"Use this context: {_content(answer).get('context')}"


# A template, so that it is not the first of resources/list (which the harness reads as a plain resource).
@resource("test://asking/{topic}", name="asking-resource", title="A Resource That Asks", mime_type="text/plain")
async def asking_resource(topic: str, ctx: Context) -> str:
    """Ask which section of ``topic`` to show (key "section") before it is read."""
    answer = await ctx.elicit("Which section?", {"type": "object", "properties": {"section": {"type": "string"}}},
                              key="section")
    return f"{topic}: section {_content(answer).get('section')}"


# -- tasks-* (the tasks extension: background tools) ---------------------------------------------

@tool(structured_output=False)
def greet(name: str) -> str:
    """Return "Hello, {name}!" at once (a tool without task support)."""
    return f"Hello, {name}!"


@tool(background=True, structured_output=False)
def slow_compute(seconds: Seconds, label: str = "", ctx: Context = None) -> str:
    """Sleep in a worker for ``seconds``, stopping at once when cancelled; a task for clients
    that declare the tasks extension."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ctx.check_cancelled()
        time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
    return f"computed {label or 'it'} in {seconds} s"


@tool(background=True, task_support="required", structured_output=False)
def failing_job(ctx: Context = None) -> str:
    """Report a tool error after about a second (it must run as a task)."""
    time.sleep(1)
    raise ToolError("failing_job failed, as it always does.")


@tool(background=True, structured_output=False)
def protocol_error_job() -> str:
    """Crash (an unexpected exception): the task fails with a protocol-level error."""
    raise RuntimeError("protocol_error_job crashed on purpose")


@tool(background=True, structured_output=False)
def confirm_delete(filename: str, ctx: Context) -> str:
    """Ask the user to confirm deleting ``filename``, then say what was done."""
    answer = ctx.elicit(f"Delete {filename}?", {"type": "object", "properties": {"confirm": {"type": "boolean"}},
                                               "required": ["confirm"]})
    confirmed = answer.get("action") == "accept" and _content(answer).get("confirm") is True
    return f"{'Deleted' if confirmed else 'Kept'} {filename}"


@tool(background=True, structured_output=False)
def confirm_greeting(ctx: Context) -> str:
    """Ask the user's name (key "user_name", which a call may answer ahead), then whether to greet
    them (key "confirm", always asked: it guards what the tool does)."""
    name = _content(ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name", answerable_ahead=True))
    answer = ctx.elicit(f"Greet {name.get('name')}?", {"type": "object", "properties": {"confirm": {
        "type": "boolean"}}, "required": ["confirm"]}, key="confirm")
    confirmed = answer.get("action") == "accept" and _content(answer).get("confirm") is True
    return f"Hello, {name.get('name')}!" if confirmed else "Not greeted."


@tool(background=True, structured_output=False)
async def multi_input(ctx: Context) -> str:
    """Ask two questions at once (two inputRequests pending together), then combine the answers."""
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "confirm": {"type": "boolean"}}}
    first, second = await asyncio.gather(ctx.elicit("First name?", schema), ctx.elicit("Second name?", schema))
    return f"{_content(first).get('name')} and {_content(second).get('name')}"


@tool(structured_output=False)
async def test_tool_with_task(ctx: Context) -> str:
    """Ask the user's name (key "user_name"), then hand the greeting to a background task: the
    retry that brings the name answers with a CreateTaskResult (needs the tasks extension)."""
    answer = await ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name")
    await ctx.run_as_task("greet_in_background", name=_content(answer).get("name", "stranger"))


@tool(background=True, structured_output=False)
def greet_in_background(name: str) -> str:
    """Return "Hello, {name}!" from a worker."""
    return f"Hello, {name}!"


@tool(structured_output=False)
def count_inline(key: CounterName, steps: Steps, interval_ms: IntervalMs, ctx: Context) -> str:
    """Count to ``steps`` in the counter ``key`` in the web process, one per interval (a
    visible side effect), reporting progress; stops once the call is cancelled (in 2026-07-28:
    its client closed the response).

    Args:
        key: The name of the counter (its cache key is bounds.counter_key(key)).
        steps: How many ticks.
        interval_ms: Milliseconds between ticks.
    """
    from django.core.cache import cache

    for i in range(1, steps + 1):
        time.sleep(interval_ms / 1000)
        ctx.check_cancelled()
        cache.set(counter_key(key), i, timeout=600)
        ctx.report_progress(i, steps)
    return f"counted {steps}"


@tool(structured_output=False)
async def escalate_twice(ctx: Context) -> str:
    """Hand the work to two tasks at once, which a call cannot do: the first task is the call's
    answer, the second ``run_as_task`` fails (tests/integration/test_call_limits.py)."""
    await asyncio.gather(ctx.run_as_task("slow_compute", seconds=600, label="first"),
                         ctx.run_as_task("slow_compute", seconds=600, label="second"))
