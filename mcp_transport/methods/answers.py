"""Whether a client's answer is a valid result of the question it answers.

A question asked and answered in order needs no such check (its answer comes from the client
the question went to, and the tool reads it as it does in the 2025-11-25 era). An answer given
*ahead*, before the question was asked (``answerable_ahead``, 2026-07-28 multi-round trips:
eras/modern_2026/rounds.py, running/worker/channel.py), is taken only if it is one: the client
never saw the question, so a wrong-shaped answer is ignored and the question asked.
"""
import jsonschema

ELICIT_ACTIONS = ("accept", "decline", "cancel")


def fits(method: str, params: dict, answer) -> bool:
    """Whether ``answer`` is a valid result of the request ``method``/``params`` (a method this
    module does not know takes no answer ahead)."""
    check = _CHECKS.get(method)
    return isinstance(answer, dict) and check is not None and check(params, answer)


def _elicit_result(params: dict, answer: dict) -> bool:
    """An ``ElicitResult``: an action, and for ``accept`` content the requested schema accepts
    ("content: The submitted form data, only present when action is "accept"")."""
    if answer.get("action") not in ELICIT_ACTIONS:
        return False
    if answer["action"] != "accept":
        return True
    content, schema = answer.get("content"), params.get("requestedSchema") or {}
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError:  # the tool's own schema is broken: ask, as without an answer
        return False
    return isinstance(content, dict) and jsonschema.Draft202012Validator(schema).is_valid(content)


def _sampling_result(_params: dict, answer: dict) -> bool:
    """A ``CreateMessageResult``: a role, the model's name and its content."""
    content = answer.get("content")
    blocks = content if isinstance(content, list) else [content]
    return answer.get("role") in ("user", "assistant") and isinstance(answer.get("model"), str) and \
        bool(blocks) and all(isinstance(block, dict) and isinstance(block.get("type"), str) for block in blocks)


def _roots_result(_params: dict, answer: dict) -> bool:
    """A ``ListRootsResult``: roots, each with its URI."""
    roots = answer.get("roots")
    return isinstance(roots, list) and all(isinstance(root, dict) and isinstance(root.get("uri"), str)
                                           for root in roots)


_CHECKS = {"elicitation/create": _elicit_result, "sampling/createMessage": _sampling_result,
           "roots/list": _roots_result}
