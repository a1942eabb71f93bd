"""session: the lifecycle table NEW -> INITIALIZING -> READY, and CLOSED."""
import pytest

from mcp_transport.protocol import session
from mcp_transport.protocol.errors import ErrorCode, InvalidRequest
from mcp_transport.protocol.session import SessionState

NEW, INITIALIZING, READY, CLOSED = (SessionState.NEW, SessionState.INITIALIZING,
                                    SessionState.READY, SessionState.CLOSED)
ERROR = InvalidRequest

METHODS = ["initialize", "notifications/initialized", "ping", "tools/list", "tools/call",
           "resources/read", "notifications/cancelled", "logging/setLevel"]

# (state, method) -> next state, or ERROR.
EXPECTED = {
    NEW: {"initialize": INITIALIZING, **{m: ERROR for m in METHODS if m != "initialize"}},
    INITIALIZING: {"initialize": ERROR, "notifications/initialized": READY,
                   **{m: INITIALIZING for m in METHODS[2:]}},
    READY: {"initialize": ERROR, "notifications/initialized": READY,
            **{m: READY for m in METHODS[2:]}},
    CLOSED: {m: ERROR for m in METHODS},
}
CASES = [(state, method, expected) for state, row in EXPECTED.items()
         for method, expected in row.items()]


def test_the_table_covers_every_state_and_method():
    assert set(EXPECTED) == set(SessionState)
    assert all(set(row) == set(METHODS) for row in EXPECTED.values())
    assert set(session.TRANSITIONS) == set(SessionState)


@pytest.mark.parametrize("state, method, expected", CASES,
                         ids=[f"{s.value}+{m}" for s, m, _ in CASES])
def test_next_state(state, method, expected):
    if expected is ERROR:
        with pytest.raises(InvalidRequest) as info:
            session.next_state(state, method)
        assert info.value.code == ErrorCode.INVALID_REQUEST == -32600
        assert info.value.http_status == 400
    else:
        assert session.next_state(state, method) is expected


@pytest.mark.parametrize("state, method, words", [
    (NEW, "tools/list", "initialize"),
    (READY, "initialize", "already initialized"),
    (INITIALIZING, "initialize", "already initialized"),
    (CLOSED, "tools/list", "closed"),
    (CLOSED, "notifications/initialized", "closed"),
])
def test_error_messages_say_why(state, method, words):
    with pytest.raises(InvalidRequest, match=words):
        session.next_state(state, method)


def test_a_whole_session():
    state = NEW
    for method in ["initialize", "ping", "notifications/initialized", "tools/list",
                   "tools/call", "notifications/initialized"]:
        state = session.next_state(state, method)
    assert state is READY


@pytest.mark.parametrize("state, value", [(NEW, "new"), (INITIALIZING, "initializing"),
                                          (READY, "ready"), (CLOSED, "closed")])
def test_states_are_strings(state, value):
    # Stored as plain strings (e.g. in Redis) and read back.
    assert state == value
    assert SessionState(value) is state
