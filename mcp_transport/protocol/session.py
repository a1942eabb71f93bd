"""Session lifecycle as a table. Rule: every state transition lives in this file.

    NEW ──initialize──▶ INITIALIZING ──notifications/initialized──▶ READY
     any ──DELETE / idle expiry──▶ CLOSED

"The initialization phase MUST be the first interaction between client and server."
-- spec 2025-11-25 basic/lifecycle. A second ``initialize`` on a live session is -32600
(checklist F8); requests other than ``initialize`` are allowed while INITIALIZING, since
"The client SHOULD NOT send requests other than pings before the server has responded to the
initialize request" leaves the rest to the server, and the initialize reply has been sent by then.
"""
from enum import Enum

from .errors import InvalidRequest


class SessionState(str, Enum):
    #: No initialize seen yet (only exists inside the initialize request).
    NEW = "new"
    #: initialize answered; waiting for notifications/initialized.
    INITIALIZING = "initializing"
    #: The client confirmed initialization.
    READY = "ready"
    #: Deleted by the client, terminated by the server, or expired.
    CLOSED = "closed"


#: state -> {method: next state}. Methods not listed keep the state, if the state is open.
TRANSITIONS = {
    SessionState.NEW: {"initialize": SessionState.INITIALIZING},
    SessionState.INITIALIZING: {"notifications/initialized": SessionState.READY},
    SessionState.READY: {"notifications/initialized": SessionState.READY},
    SessionState.CLOSED: {},
}

#: Methods that may only be the first message of a session.
FIRST_ONLY = frozenset({"initialize"})


def next_state(state: SessionState, method: str) -> SessionState:
    """The state after ``method`` is received in ``state``; raises InvalidRequest if illegal."""
    table = TRANSITIONS[state]
    if method in table:
        return table[method]
    if state is SessionState.NEW:
        raise InvalidRequest("The session is not initialized: send initialize first.")
    if method in FIRST_ONLY:
        raise InvalidRequest("This session is already initialized.")
    if state is SessionState.CLOSED:
        raise InvalidRequest("This session is closed.")
    return state
