"""The shortest path through a real daphne process: initialize, call a tool, delete."""


def test_echo_round_trip(session):
    reply = session.call("tools/call", {"name": "echo", "arguments": {"text": "Hello, 世界"}})
    assert reply["result"]["structuredContent"] == {"result": "Hello, 世界"}
    assert reply["result"]["content"] == [{"type": "text", "text": "Hello, 世界"}]
    assert session.delete().status == 200
    assert session.request("POST", session.message("ping")).status == 404
