"""methods/answers.py: which answers given ahead are valid answers to their question."""
import pytest

from mcp_transport.methods.answers import fits

NAME = {"message": "Name?", "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}},
                                                "required": ["name"]}}


@pytest.mark.parametrize("answer, valid", [
    ({"action": "accept", "content": {"name": "Alice"}}, True),
    ({"action": "accept", "content": {"name": "Alice", "extra": 1}}, True),  # the schema allows more
    ({"action": "decline"}, True),
    ({"action": "cancel"}, True),
    ({"action": "accept", "content": {}}, False),
    ({"action": "accept", "content": {"name": 7}}, False),
    ({"action": "accept", "content": ["Alice"]}, False),
    ({"action": "accept"}, False),
    ({"action": "yes", "content": {"name": "Alice"}}, False),
    ({"content": {"name": "Alice"}}, False),
    ("accept", False),
    (None, False),
])
def test_an_elicitation_answer_fits_when_its_accepted_content_fits_the_requested_schema(answer, valid):
    assert fits("elicitation/create", NAME, answer) is valid


def test_a_tools_broken_schema_takes_no_answer_ahead():
    assert not fits("elicitation/create", {"requestedSchema": {"type": "no-such-type"}},
                    {"action": "accept", "content": {}})


@pytest.mark.parametrize("answer, valid", [
    ({"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m"}, True),
    ({"role": "assistant", "content": [{"type": "text", "text": "Paris"}], "model": "m"}, True),
    ({"role": "assistant", "content": {"type": "text", "text": "Paris"}}, False),  # no model
    ({"role": "system", "content": {"type": "text", "text": "Paris"}, "model": "m"}, False),
    ({"role": "assistant", "content": [], "model": "m"}, False),
    ({"role": "assistant", "content": "Paris", "model": "m"}, False),
])
def test_a_sampling_answer_fits_when_it_is_a_create_message_result(answer, valid):
    assert fits("sampling/createMessage", {"messages": [], "maxTokens": 5}, answer) is valid


@pytest.mark.parametrize("answer, valid", [
    ({"roots": []}, True),
    ({"roots": [{"uri": "file:///x", "name": "x"}]}, True),
    ({"roots": [{"name": "x"}]}, False),
    ({"roots": "file:///x"}, False),
    ({}, False),
])
def test_a_roots_answer_fits_when_it_lists_roots_with_uris(answer, valid):
    assert fits("roots/list", {}, answer) is valid


def test_a_method_it_does_not_know_takes_no_answer_ahead():
    assert not fits("ping", {}, {})
