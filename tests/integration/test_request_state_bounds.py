"""Issue 20, class 6: a sealed requestState is at most MAX_REQUEST_STATE_BYTES, the answers
carried into it are bounded, and a retry cannot make it inflate (it was compressed: a 5 KB state
of a repetitive answer unsealed to 3.9 MB on every retry, 82 ms of CPU each)."""
import pytest

from mcp_transport.testing import ModernClient

TOOL = {"name": "test_input_required_result_multi_round", "arguments": {}}
LIMIT = 256 * 1024  # MAX_REQUEST_STATE_BYTES's default


@pytest.fixture
def client(mcp_server):
    return ModernClient(mcp_server.url, capabilities={"elicitation": {}})


def _result(reply):
    assert reply.status == 200, reply.body
    return reply.json


def _step1(client):
    asked = _result(client.post("tools/call", TOOL))["result"]
    assert asked["resultType"] == "input_required" and "step1" in asked["inputRequests"], asked
    return asked["requestState"]


def _answer(client, state, key, content):
    return _result(client.post("tools/call", {**TOOL, "requestState": state,
                                              "inputResponses": {key: {"action": "accept", "content": content}}}))


def test_an_answer_too_large_to_carry_is_refused_and_never_sealed(client):
    state = _step1(client)
    reply = _answer(client, state, "step1", {"name": "a" * 3_000_000})
    assert reply["error"]["code"] == -32602, str(reply)[:300]
    assert f"at most {LIMIT}" in reply["error"]["message"]


def test_an_honest_multi_round_request_still_completes_and_its_state_is_not_compressed(client):
    state = _step1(client)
    second = _answer(client, state, "step1", {"name": "Ada " * 200})["result"]
    assert second["resultType"] == "input_required" and "step2" in second["inputRequests"], second
    assert not second["requestState"].startswith(".")  # django.core.signing's mark of a compressed payload
    assert len(second["requestState"]) > 800  # the answer is carried as it is
    done = _answer(client, second["requestState"], "step2", {"color": "blue"})["result"]
    assert "Ada" in str(done["content"]) and "blue" in str(done["content"]), done


@pytest.mark.parametrize("state, reason", [("x" * (LIMIT + 1), "invalid"), (".eJwzNDAA.forged:sig", "invalid")])
def test_an_oversized_or_compressed_state_is_refused_unread(client, state, reason):
    reply = _answer(client, state, "step1", {"name": "a"})
    assert reply["error"]["code"] == -32602 and reply["error"]["data"]["reason"] == reason, reply
