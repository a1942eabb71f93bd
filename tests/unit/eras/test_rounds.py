"""rounds.py and request_state.py: inline handlers across the rounds of a 2026-07-28 request,
and the seal of their requestState (Django's signing, keyed from SECRET_KEY)."""
import asyncio
import threading
import time

import pytest
from django.core import signing
from django.test import override_settings

from mcp_transport.methods import dispatch
from mcp_transport.eras.modern_2026 import request_state, rounds
from mcp_transport.methods.context import Context, SyncContext
from mcp_transport.protocol import mrtr
from mcp_transport.state.sessions import SessionRecord

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}


class Channel:
    request_id = 1
    cancelled = False
    round = None

    async def request(self, method, params, **options):
        return await self.round.request(method, params, **options)

    async def notify(self, method, params):
        pass


def make_call(principal="", capabilities=None):
    session = SessionRecord(id="", protocol_version="2026-07-28", principal=principal,
                            client_capabilities=capabilities or {"elicitation": {}, "sampling": {}, "roots": {}})
    return dispatch.Call(session=session, channel=Channel())


def handler_of(body, context_class=Context):
    async def handler(params, call):
        ctx = context_class(channel=call.channel, session_id="", request_id=1,
                            client_capabilities=call.session.client_capabilities)
        if context_class is SyncContext:
            return {"text": await asyncio.to_thread(body, ctx)}
        return {"text": await body(ctx)}
    return handler


async def ask_name(ctx):
    answer = await ctx.elicit("Name?", SCHEMA, key="user_name")
    return f"Hello, {answer['content']['name']}!"


def rounds_of(handler, params, answers_by_round=()):
    """Serve ``params`` round after round, answering each with the next of ``answers_by_round``."""
    results = []
    params = dict(params)
    for answers in [*answers_by_round, None]:
        result = asyncio.run(rounds.serve(handler, "tools/call", params, make_call()))
        results.append(result)
        if result.get("resultType") != "input_required" or answers is None:
            return results
        params = {**params, "inputResponses": answers, "requestState": result["requestState"]}
    return results


def test_an_unanswered_question_ends_the_round_and_its_answer_completes_the_retry():
    first, second = rounds_of(handler_of(ask_name), {"name": "t"},
                              answers_by_round=[{"user_name": {"action": "accept", "content": {"name": "Ada"}}}])
    assert first["resultType"] == "input_required"
    assert first["inputRequests"] == {"user_name": {"method": "elicitation/create",
                                                    "params": {"message": "Name?", "requestedSchema": SCHEMA}}}
    assert isinstance(first["requestState"], str)
    assert second == {"text": "Hello, Ada!"}


def test_questions_asked_together_come_in_one_round():
    async def body(ctx):
        name, sampled, roots = await asyncio.gather(ctx.elicit("Name?", SCHEMA, key="n"),
                                                    ctx.sample(["hi"], max_tokens=5, key="s"),
                                                    ctx.list_roots(key="r"))
        return f"{name['content']['name']} {sampled['content']['text']} {len(roots)}"
    answers = {"n": {"action": "accept", "content": {"name": "Ada"}},
               "s": {"role": "assistant", "content": {"type": "text", "text": "yo"}, "model": "m"},
               "r": {"roots": [{"uri": "file:///x"}]}}
    first, second = rounds_of(handler_of(body), {"name": "t"}, answers_by_round=[answers])
    assert sorted(first["inputRequests"]) == ["n", "r", "s"]
    assert second == {"text": "Ada yo 1"}


def test_later_rounds_carry_earlier_answers_in_the_state():
    async def body(ctx):
        first = await ctx.elicit("1?", SCHEMA, key="step1")
        second = await ctx.elicit("2?", SCHEMA, key="step2")
        return first["content"]["name"] + second["content"]["name"]
    one, two, three = rounds_of(handler_of(body), {"name": "t"}, answers_by_round=[
        {"step1": {"action": "accept", "content": {"name": "a"}}},
        {"step2": {"action": "accept", "content": {"name": "b"}}}])
    assert list(one["inputRequests"]) == ["step1"] and list(two["inputRequests"]) == ["step2"]
    assert three == {"text": "ab"}


def test_a_sync_handler_ends_the_round_at_its_question():
    def body(ctx):
        answer = ctx.elicit("Name?", SCHEMA, key="user_name")
        return answer["content"]["name"]
    first, second = rounds_of(handler_of(body, SyncContext), {"name": "t"},
                              answers_by_round=[{"user_name": {"action": "accept", "content": {"name": "Bo"}}}])
    assert list(first["inputRequests"]) == ["user_name"] and second == {"text": "Bo"}


def test_a_handler_that_catches_exceptions_still_ends_its_round():
    async def body(ctx):
        try:
            await ctx.elicit("Name?", SCHEMA, key="user_name")
        except Exception:
            return "swallowed"
        return "answered"
    first, = rounds_of(handler_of(body), {"name": "t"})
    assert first["resultType"] == "input_required"


def test_the_parked_handler_is_cancelled_when_its_round_ends():
    stopped = threading.Event()

    async def body(ctx):
        try:
            await ctx.elicit("Name?", SCHEMA)
        finally:
            stopped.set()
    rounds_of(handler_of(body), {"name": "t"})
    assert stopped.is_set()


# -- answers only to questions asked (issue 30, class 4) -----------------------------------------

ADA = {"action": "accept", "content": {"name": "Ada"}}


def serve(handler, params, call=None):
    return asyncio.run(rounds.serve(handler, "tools/call", params, call or make_call()))


def test_answers_without_a_state_are_ignored_and_the_question_is_asked_again():
    """A first request cannot bring answers: the server asked nothing yet (the confirmation
    bypass of author_delete_selected: a made-up {"confirm": ...} deleted at once)."""
    result = serve(handler_of(ask_name), {"name": "t", "inputResponses": {"user_name": ADA, "extra": {"x": True}}})
    assert result["resultType"] == "input_required" and list(result["inputRequests"]) == ["user_name"]
    assert request_state.unseal(result["requestState"], "tools/call", {"name": "t"}, make_call())["answers"] == {}


def test_the_state_records_the_questions_its_round_asked():
    first, = rounds_of(handler_of(ask_name), {"name": "t"})
    payload = request_state.unseal(first["requestState"], "tools/call", {"name": "t"}, make_call())
    question = first["inputRequests"]["user_name"]
    assert payload == {"answers": {}, "questions": {
        "user_name": mrtr.question_digest(question["method"], question["params"])}}


def test_answers_to_keys_the_round_did_not_ask_are_ignored():
    first, = rounds_of(handler_of(ask_name), {"name": "t"})
    again = serve(handler_of(ask_name), {"name": "t", "requestState": first["requestState"],
                                         "inputResponses": {"elicit-1": ADA, "other": ADA}})
    assert again["resultType"] == "input_required" and list(again["inputRequests"]) == ["user_name"]


def test_an_answer_goes_only_to_the_question_it_was_given_to():
    """The same key asking something else on the retry (what the handler asks depends on data
    that changed between rounds) is a new question: the answer to the old one is not used."""
    def asking(message):
        async def body(ctx):
            answer = await ctx.elicit(message, SCHEMA, key="confirm")
            return answer["content"]["name"]
        return handler_of(body)
    first, = rounds_of(asking("Delete 1 row?"), {"name": "t"})
    changed = serve(asking("Delete 500 rows?"), {"name": "t", "requestState": first["requestState"],
                                                 "inputResponses": {"confirm": ADA}})
    assert changed["resultType"] == "input_required"
    assert changed["inputRequests"]["confirm"]["params"]["message"] == "Delete 500 rows?"
    same = serve(asking("Delete 1 row?"), {"name": "t", "requestState": first["requestState"],
                                           "inputResponses": {"confirm": ADA}})
    assert same == {"text": "Ada"}


def test_a_carried_answer_is_bound_to_its_question_too():
    def two_steps(first_message):
        async def body(ctx):
            first = await ctx.elicit(first_message, SCHEMA, key="step1")
            second = await ctx.elicit("2?", SCHEMA, key="step2")
            return first["content"]["name"] + second["content"]["name"]
        return handler_of(body)
    one, two = rounds_of(two_steps("1?"), {"name": "t"}, answers_by_round=[{"step1": ADA}])
    assert list(two["inputRequests"]) == ["step2"]
    retry = {"name": "t", "requestState": two["requestState"], "inputResponses": {"step2": ADA, "step1": ADA}}
    assert serve(two_steps("1?"), retry) == {"text": "AdaAda"}
    changed = serve(two_steps("1, again?"), retry)  # the carried answer was to "1?": asked again
    assert changed["resultType"] == "input_required" and list(changed["inputRequests"]) == ["step1"]


def test_a_retry_cannot_replace_an_answer_its_state_carries():
    async def body(ctx):
        first = await ctx.elicit("1?", SCHEMA, key="step1")
        second = await ctx.elicit("2?", SCHEMA, key="step2")
        return first["content"]["name"] + second["content"]["name"]
    one, two = rounds_of(handler_of(body), {"name": "t"}, answers_by_round=[{"step1": ADA}])
    other = {"action": "accept", "content": {"name": "Eve"}}
    done = serve(handler_of(body), {"name": "t", "requestState": two["requestState"],
                                    "inputResponses": {"step1": other, "step2": other}})
    assert done == {"text": "AdaEve"}


def test_a_state_of_a_round_that_asked_nothing_answers_nothing():
    """A state sealed with no record of questions (an earlier version's, or a load-shedding one):
    its answers and the retry's are ignored, and the handler asks."""
    sealed = request_state.seal("tools/call", {"name": "t"}, make_call(), {"answers": {"user_name": ADA}})
    again = serve(handler_of(ask_name), {"name": "t", "requestState": sealed, "inputResponses": {"user_name": ADA}})
    assert again["resultType"] == "input_required" and list(again["inputRequests"]) == ["user_name"]


def test_a_tampered_state_is_refused():
    first, = rounds_of(handler_of(ask_name), {"name": "t"})
    with pytest.raises(mrtr.BadRequestState) as caught:
        asyncio.run(rounds.serve(handler_of(ask_name), "tools/call",
                                 {"name": "t", "requestState": first["requestState"] + "-TAMPERED"}, make_call()))
    assert caught.value.code == -32602 and caught.value.data == {"reason": "invalid"}


def test_a_state_signed_with_another_key_is_refused():
    forged = signing.dumps(mrtr.make_claims("tools/call", {"name": "t"}, None, {"answers": {}}),
                           key="another-secret-key-" * 3, salt=request_state.SALT, compress=True)
    with pytest.raises(mrtr.BadRequestState, match="altered or not issued"):
        request_state.unseal(forged, "tools/call", {"name": "t"}, make_call())


def test_an_expired_state_is_refused(monkeypatch):
    sealed = request_state.seal("tools/call", {"name": "t"}, make_call(), {"answers": {}})
    later = time.time() + 601
    monkeypatch.setattr(signing.time, "time", lambda: later)
    with pytest.raises(mrtr.BadRequestState) as caught:
        request_state.unseal(sealed, "tools/call", {"name": "t"}, make_call())
    assert caught.value.data == {"reason": "expired"}


@override_settings(MCP_TRANSPORT={"REQUEST_STATE_TTL": 10_000})
def test_the_ttl_is_a_setting(monkeypatch):
    sealed = request_state.seal("tools/call", {"name": "t"}, make_call(), {"k": 1})
    later = time.time() + 601
    monkeypatch.setattr(signing.time, "time", lambda: later)
    assert request_state.unseal(sealed, "tools/call", {"name": "t"}, make_call()) == {"k": 1}


def test_a_state_is_bound_to_the_principal_and_the_arguments():
    sealed = request_state.seal("tools/call", {"name": "t", "arguments": {"a": 1}}, make_call("user:7"), {})
    assert request_state.unseal(sealed, "tools/call", {"name": "t", "arguments": {"a": 1}}, make_call("user:7")) == {}
    for principal, arguments in (("user:8", {"a": 1}), ("", {"a": 1}), ("user:7", {"a": 2})):
        with pytest.raises(mrtr.BadRequestState, match="another request or principal"):
            request_state.unseal(sealed, "tools/call", {"name": "t", "arguments": arguments}, make_call(principal))


def test_invalid_input_responses_are_refused_before_the_handler_runs():
    ran = []

    async def body(ctx):
        ran.append(True)
        return "ran"
    with pytest.raises(mrtr.BadRequestState.__mro__[1]):  # InvalidParams
        asyncio.run(rounds.serve(handler_of(body), "tools/call", {"name": "t", "inputResponses": {"k": 1}},
                                 make_call()))
    assert not ran


# -- answers given ahead: a question the tool declares answerable_ahead (issue 38) ----------------

NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
#: What the conformance check sep-2322-ignore-unexpected-params sends on its first call.
HARNESS = {"user_name": {"action": "accept", "content": {"name": "Alice"}},
           "unknown_extra_key": {"action": "accept", "content": {"foo": "bar"}},
           "another_unexpected": {"action": "accept", "content": {"baz": 123}}}


async def ask_name_ahead(ctx):
    answer = await ctx.elicit("Name?", NAME, key="user_name", answerable_ahead=True)
    return f"Hello, {answer['content']['name']}!"


def test_a_question_answerable_ahead_takes_the_answer_a_first_request_gives():
    assert serve(handler_of(ask_name_ahead), {"name": "t", "inputResponses": HARNESS}) == {"text": "Hello, Alice!"}


def test_a_sync_handler_takes_an_answer_given_ahead_too():
    def body(ctx):
        return ctx.elicit("Name?", NAME, key="user_name", answerable_ahead=True)["content"]["name"]
    assert serve(handler_of(body, SyncContext), {"name": "t", "inputResponses": HARNESS}) == {"text": "Alice"}


def test_a_question_without_the_opt_in_is_asked_whatever_was_given_ahead():
    result = serve(handler_of(ask_name), {"name": "t", "inputResponses": HARNESS})
    assert result["resultType"] == "input_required" and list(result["inputRequests"]) == ["user_name"]


@pytest.mark.parametrize("given", [
    {"action": "accept", "content": {}},                       # lacks the required name
    {"action": "accept", "content": {"name": 5}},              # a name that is no string
    {"action": "accept"},                                      # accepted without content
    {"action": "maybe", "content": {"name": "Alice"}},         # no such action
    {"role": "assistant", "content": {"type": "text", "text": "Alice"}, "model": "m"},  # another method's result
])
def test_an_answer_given_ahead_that_is_no_valid_answer_is_ignored_and_the_question_asked(given):
    result = serve(handler_of(ask_name_ahead), {"name": "t", "inputResponses": {"user_name": given}})
    assert result["resultType"] == "input_required" and list(result["inputRequests"]) == ["user_name"]
    payload = request_state.unseal(result["requestState"], "tools/call", {"name": "t"}, make_call())
    assert payload["answers"] == {}  # nothing of it carried
    done = serve(handler_of(ask_name_ahead), {"name": "t", "requestState": result["requestState"],
                                              "inputResponses": {"user_name": ADA}})
    assert done == {"text": "Hello, Ada!"}


def test_an_answer_given_ahead_counts_only_under_its_own_key():
    async def body(ctx):
        answer = await ctx.elicit("Name?", NAME, key="user_name", answerable_ahead=True)
        other = await ctx.elicit("Other?", NAME, key="other")
        return answer["content"]["name"] + other["content"]["name"]
    result = serve(handler_of(body), {"name": "t", "inputResponses": {"user_name": ADA, "other": ADA}})
    assert result["resultType"] == "input_required" and list(result["inputRequests"]) == ["other"]


def test_a_declined_answer_given_ahead_is_an_answer():
    async def body(ctx):
        return (await ctx.elicit("Name?", NAME, key="user_name", answerable_ahead=True))["action"]
    assert serve(handler_of(body), {"name": "t", "inputResponses": {"user_name": {"action": "decline"}}}) == \
        {"text": "decline"}


def two_steps_ahead(first_ahead, second_ahead):
    async def body(ctx):
        first = await ctx.elicit("1?", NAME, key="step1", answerable_ahead=first_ahead)
        second = await ctx.elicit("2?", NAME, key="step2", answerable_ahead=second_ahead)
        return first["content"]["name"] + second["content"]["name"]
    return handler_of(body)


def test_an_answer_given_ahead_and_taken_is_carried_bound_to_its_question():
    handler = two_steps_ahead(True, False)
    eve = {"action": "accept", "content": {"name": "Eve"}}
    first = serve(handler, {"name": "t", "inputResponses": {"step1": ADA, "step2": ADA}})
    assert list(first["inputRequests"]) == ["step2"]  # step2 takes no answer ahead
    payload = request_state.unseal(first["requestState"], "tools/call", {"name": "t"}, make_call())
    assert payload["answers"] == {"step1": ADA}
    # The retry need not give it again, and cannot replace it.
    done = serve(handler, {"name": "t", "requestState": first["requestState"],
                           "inputResponses": {"step1": eve, "step2": eve}})
    assert done == {"text": "AdaEve"}


def test_an_answer_given_ahead_on_a_retry_counts_for_a_question_that_round_did_not_ask():
    handler = two_steps_ahead(False, True)
    first = serve(handler, {"name": "t"})
    assert list(first["inputRequests"]) == ["step1"]
    done = serve(handler, {"name": "t", "requestState": first["requestState"],
                           "inputResponses": {"step1": ADA, "step2": ADA}})
    assert done == {"text": "AdaAda"}


def test_answerable_ahead_needs_a_key_of_the_tools_choosing():
    async def body(ctx):
        await ctx.elicit("Name?", NAME, answerable_ahead=True)
    with pytest.raises(ValueError, match="answerable_ahead needs a key"):
        serve(handler_of(body), {"name": "t", "inputResponses": {"elicit-1": ADA}})
