"""What the legacy era (2025-11-25, and 2024-11-05 before it) says of a request, whatever
carries it (Streamable HTTP, stdio, HTTP+SSE): the session's lifecycle, the version it
negotiates, what a client notification does, and the form of its answers. How those answers
reach the client is the transport's (``LegacyResponder``'s subclasses in transports/).
"""
import asyncio

from ...conf import get_config
from ...methods import dispatch
from ...protocol import jsonrpc, versions
from ...protocol.errors import InvalidParams, ProtocolError
from ...protocol.session import SessionState, next_state
from ...running import jobs, streams
from ...running.pipeline import EraRules
from ...state import metrics, sessions

#: Revisions a client may ask for over a transport that carries messages: Streamable HTTP's,
#: and 2024-11-05, the revision that defined HTTP+SSE (its clients speak no later one).
MESSAGE_VERSIONS = (*versions.SUPPORTED, "2024-11-05")


async def enter_state(session, request) -> None:
    """The session's next state for ``request`` (InvalidRequest where its lifecycle forbids it,
    -32602 for a bad progress token, before anything is stored under it), kept."""
    state = next_state(SessionState(session.state), request.method)
    jsonrpc.progress_token(request.params)
    if state.value != session.state and request.method != "initialize":  # initialize keeps its own
        await sessions.update(session, state=state.value)


async def receive_notification(session, notification) -> None:
    """What a client notification does to its session, whichever transport carried it."""
    method = notification.method
    if method == "notifications/initialized" and session.state == SessionState.INITIALIZING.value:
        await sessions.update(session, state=SessionState.READY.value)
    elif method == "notifications/cancelled":
        request_id = notification.params.get("requestId")
        # "Invalid cancellation notifications SHOULD be ignored." -- basic/utilities/cancellation
        if isinstance(request_id, (str, int)) and not isinstance(request_id, bool):
            # A background job it stops is recorded in the audit trail: by the session's caller.
            stop = jobs.Stop(method, session.principal, session.address, request_id)
            await asyncio.gather(streams.request_cancel(session.id, request_id),
                                 jobs.cancel_request(session.id, request_id, stop))


def take_initialize(session, params: dict, supported=versions.SUPPORTED) -> str:
    """What an ``initialize`` request gives its session, whatever carries it: the version it
    negotiates, the client's info and capabilities (kept with the session; InvalidParams, and
    nothing taken, when they are larger than MAX_CLIENT_INFO_BYTES). Returns the version."""
    info, capabilities = params.get("clientInfo"), params.get("capabilities")
    info = info if isinstance(info, dict) else {}
    capabilities = capabilities if isinstance(capabilities, dict) else {}
    limit = get_config()["MAX_CLIENT_INFO_BYTES"]
    size = len(jsonrpc.dumps(capabilities)) + len(jsonrpc.dumps(info))
    if size > limit:
        metrics.incr("limit_refusals:client_info_bytes")
        raise InvalidParams(f"capabilities and clientInfo take {size} bytes; this server keeps at most {limit} "
                            "per session.")
    session.client_info, session.client_capabilities = info, capabilities
    session.protocol_version = versions.negotiate(params.get("protocolVersion"), supported)
    return session.protocol_version


#: The method that opens a session ("The initialization phase MUST be the first interaction").
INITIALIZE = "initialize"

#: The legacy era's rules: a background tool's job writes the request's stream, which the
#: client may resume anywhere; "Errors in the request ... are answered with a JSON-RPC error":
#: in-band, 200.
RULES = EraRules(dispatch.METHODS, resumable_jobs=True, in_band_errors=True)


class LegacyResponder:
    """The era's half of a request pipeline responder (running/pipeline.py) for a request in a
    session: its checks, its methods, its answers' form. A transport adds how they are sent, and
    how a session its ``initialize`` opened is kept (``keep_session``)."""

    __slots__ = ("session",)

    rules = RULES
    #: The revisions its ``initialize`` may negotiate (the message transports add 2024-11-05).
    versions = versions.SUPPORTED

    def __init__(self, session):
        self.session = session

    async def check(self, request, call) -> None:
        await enter_state(self.session, request)

    async def handle(self, request, call) -> dict:
        if request.method == INITIALIZE:  # the lifecycle's own method: it opens the session
            return await self.initialize(request.params)
        if call.channel is None:  # answered with one message: nothing goes out before its result
            call.channel = streams.JsonReplyChannel(request.id)
        return await dispatch.dispatch(request, call)

    async def initialize(self, params: dict) -> dict:
        """What ``initialize`` gives its session (``take_initialize``), kept; the server's side."""
        session = self.session
        version = take_initialize(session, params, self.versions)
        session.state = next_state(SessionState(session.state), INITIALIZE).value  # initializing
        await self.keep_session()
        return dispatch.initialize_result(version)

    async def keep_session(self) -> None:
        """Keep what ``initialize`` gave the session (the transport's way)."""
        raise NotImplementedError

    def result_reply(self, request, result: dict) -> dict:
        return jsonrpc.result_message(request.id, result)

    def error_reply(self, request_id, exc: ProtocolError) -> dict:
        return jsonrpc.error_message(request_id, exc.code, exc.message, exc.data)
