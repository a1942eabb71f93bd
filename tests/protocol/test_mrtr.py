"""protocol/mrtr.py: the claims of a requestState, the client's answers, a round's keys."""
import pytest

from mcp_transport.protocol import mrtr
from mcp_transport.protocol.errors import InvalidParams

PARAMS = {"name": "deploy", "arguments": {"env": "prod", "count": 2}}


def test_claims_of_this_request_and_principal_give_the_payload_back():
    claims = mrtr.make_claims("tools/call", PARAMS, "user:7", {"answers": {"a": {}}})
    assert mrtr.check_claims(claims, "tools/call", dict(PARAMS), "user:7") == {"answers": {"a": {}}}


def test_arguments_in_another_order_are_the_same_request():
    claims = mrtr.make_claims("tools/call", PARAMS, None, {})
    reordered = {"arguments": {"count": 2, "env": "prod"}, "name": "deploy"}
    assert mrtr.check_claims(claims, "tools/call", reordered, None) == {}


@pytest.mark.parametrize("method, params, principal", [
    ("tools/call", {"name": "deploy", "arguments": {"env": "dev", "count": 2}}, None),  # other arguments
    ("tools/call", {"name": "rollback", "arguments": PARAMS["arguments"]}, None),     # other tool
    ("prompts/get", PARAMS, None),                                                     # other method
    ("tools/call", PARAMS, "user:8"),                                                  # other principal
])
def test_state_of_another_request_or_principal_is_foreign(method, params, principal):
    claims = mrtr.make_claims("tools/call", PARAMS, None, {})
    with pytest.raises(mrtr.BadRequestState) as caught:
        mrtr.check_claims(claims, method, params, principal)
    assert caught.value.code == -32602 and caught.value.data == {"reason": "foreign"}


def test_state_bound_to_a_principal_is_foreign_to_an_anonymous_request():
    claims = mrtr.make_claims("tools/call", PARAMS, "user:7", {})
    with pytest.raises(mrtr.BadRequestState, match="another request or principal"):
        mrtr.check_claims(claims, "tools/call", PARAMS, None)


@pytest.mark.parametrize("claims", [None, [], {"v": 2, "s": {}}, {"v": 1, "s": "x"}])
def test_claims_of_an_unknown_shape_are_tampered(claims):
    with pytest.raises(mrtr.BadRequestState) as caught:
        mrtr.check_claims(claims, "tools/call", PARAMS, None)
    assert caught.value.data == {"reason": "invalid"}


def test_resources_bind_their_uri():
    claims = mrtr.make_claims("resources/read", {"uri": "file:///a"}, None, {})
    with pytest.raises(mrtr.BadRequestState):
        mrtr.check_claims(claims, "resources/read", {"uri": "file:///b"}, None)


@pytest.mark.parametrize("responses", [12345, [], "x", {"user_name": 12345}, {"k": [1]}])
def test_input_responses_that_are_not_an_object_of_results_are_invalid_params(responses):
    with pytest.raises(InvalidParams, match="inputResponses must be an object"):
        mrtr.input_responses({"inputResponses": responses})


def test_absent_input_responses_are_none_given():
    assert mrtr.input_responses({}) == {} and mrtr.input_responses({"inputResponses": None}) == {}


def test_a_request_state_that_is_not_a_string_is_tampered():
    assert mrtr.request_state({"requestState": None}) is None
    with pytest.raises(mrtr.BadRequestState):
        mrtr.request_state({"requestState": {"forged": True}})


def test_round_numbers_unnamed_questions_in_asking_order_and_keeps_named_ones():
    first = mrtr.Round()
    assert [first.key_for("elicitation/create"), first.key_for("sampling/createMessage", "q"),
            first.key_for("roots/list")] == ["elicit-1", "q", "roots-3"]


QUESTION = ("elicitation/create", {"message": "Name?", "requestedSchema": {"type": "object"}})


def test_round_state_carries_only_the_answers_it_used():
    digest = mrtr.question_digest(*QUESTION)
    round_ = mrtr.Round({"user_name": {"action": "accept"}, "extra": {"x": 1}}, {"user_name": digest, "extra": digest})
    assert round_.answer("user_name", *QUESTION) == {"action": "accept"}
    assert round_.answer("missing", *QUESTION) is None
    round_.ask("next", "roots/list", {})
    assert round_.carried() == {"answers": {"user_name": {"action": "accept"}}, "questions": {
        "user_name": digest, "next": mrtr.question_digest("roots/list", {})}}


def test_an_answer_is_given_only_to_the_question_it_answered():
    round_ = mrtr.Round({"k": {"action": "accept"}}, {"k": mrtr.question_digest(*QUESTION)})
    assert round_.answer("k", "elicitation/create", {"message": "Other?", "requestedSchema": {"type": "object"}}) \
        is None
    assert round_.answer("k", "sampling/createMessage", QUESTION[1]) is None
    assert round_.answer("k", *QUESTION) == {"action": "accept"}


def test_question_digests_ignore_key_order_and_tell_questions_apart():
    reordered = {"requestedSchema": {"type": "object"}, "message": "Name?"}
    assert mrtr.question_digest("elicitation/create", reordered) == mrtr.question_digest(*QUESTION)
    assert mrtr.question_digest("elicitation/create", {**reordered, "message": "Name!"}) != \
        mrtr.question_digest(*QUESTION)


@pytest.mark.parametrize("payload, responses, known", [
    ({}, {"k": {"a": 1}}, {}),                                                 # no state: nothing asked
    ({"questions": {"k": "d"}}, {"k": {"a": 1}, "x": {"b": 2}}, {"k": {"a": 1}}),  # extra keys ignored
    ({"questions": {"k": "d"}, "answers": {"k": {"a": 0}}}, {"k": {"a": 1}}, {"k": {"a": 0}}),  # carried stays
    ({"answers": {"k": {"a": 0}}}, {}, {}),                                   # carried without its question
    ({"questions": "forged", "answers": []}, {"k": {"a": 1}}, {}),
])
def test_a_resumed_round_knows_only_answers_to_questions_its_state_asked(payload, responses, known):
    assert mrtr.Round.resume(payload, responses).answers == known


def test_input_required_result_has_its_result_type_and_state():
    result = mrtr.input_required_result({"k": {"method": "roots/list", "params": {}}}, "sealed")
    assert result == {"resultType": "input_required", "inputRequests": {"k": {"method": "roots/list", "params": {}}},
                      "requestState": "sealed"}


def test_input_required_is_not_an_exception_a_tool_would_catch():
    assert not issubclass(mrtr.InputRequired, Exception)


# -- answers given ahead (issue 38) -------------------------------------------------------------

@pytest.mark.parametrize("payload, responses, ahead", [
    ({}, {"k": {"a": 1}, "x": {"b": 2}}, {"k": {"a": 1}, "x": {"b": 2}}),   # no state: every answer
    ({"questions": {"k": "d"}}, {"k": {"a": 1}, "x": {"b": 2}}, {"x": {"b": 2}}),  # keys the round did not ask
    ({"questions": {"k": "d"}, "answers": {"k": {"a": 0}}}, {"k": {"a": 1}}, {}),
])
def test_a_resumed_round_holds_the_answers_to_keys_it_did_not_ask_as_given_ahead(payload, responses, ahead):
    assert mrtr.Round.resume(payload, responses).ahead == ahead


def test_an_answer_given_ahead_is_taken_only_if_it_fits_and_then_is_carried_bound():
    round_ = mrtr.Round.resume({}, {"k": {"action": "accept"}, "bad": {"action": "no"}})
    assert round_.answer("k", *QUESTION) is None  # not an answer to a question asked
    fits = []
    assert round_.answer_ahead("bad", *QUESTION, lambda *given: fits.append(given) or False) is None
    assert fits == [(*QUESTION, {"action": "no"})]
    assert round_.answer_ahead("k", *QUESTION, lambda *_: True) == {"action": "accept"}
    assert round_.answer("k", *QUESTION) == {"action": "accept"}  # from now on, its answer
    assert round_.answer_ahead("k", "roots/list", {}, lambda *_: True) is None  # taken once, by its question
    assert round_.carried() == {"answers": {"k": {"action": "accept"}},
                                "questions": {"k": mrtr.question_digest(*QUESTION)}}
