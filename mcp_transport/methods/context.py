"""``Context``: what a tool can do while it runs, besides returning its result.

A tool asks for it with a parameter annotated ``Context``. Async tools get ``Context`` (await
its methods); sync tools, which run in a worker thread, get ``SyncContext`` with the same
methods as plain calls. Everything a tool sends goes on its own request's stream: "These
messages SHOULD relate to the originating client request." -- spec 2025-11-25 basic/transports
"""
import contextvars
import logging
from typing import Any, Optional

from asgiref.sync import async_to_sync
from django.db import connections

from ..protocol import apps, extensions
from . import threads

logger = logging.getLogger(__name__)

#: RFC 5424 severities, lowest first (spec 2025-11-25 server/utilities/logging).
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


class ToolCancelled(Exception):
    """Raised by ``check_cancelled()`` once the client has cancelled the request."""


class ClientCapabilityError(Exception):
    """The client did not declare the capability a request needs."""


class TaskStarted(BaseException):
    """Ends a call with the ``CreateTaskResult`` of the background tool it handed its work to
    (``Context.run_as_task``). A BaseException: a tool's ``except Exception`` must not catch it."""

    def __init__(self, result: dict):
        super().__init__(f"task {result.get('taskId')} started")
        self.result = result


class ClientRequestError(Exception):
    """The client answered a request (sampling, elicitation, roots) with an error, or not in time."""

    def __init__(self, method, error, text=None):
        message = error.get("message", error) if isinstance(error, dict) else error
        super().__init__(text or f"The client answered {method} with an error: {message}")
        self.error = error


class Context:
    def __init__(self, *, channel, session_id: str, request_id, progress_token=None, user=None,
                 client_capabilities: Optional[dict] = None, log_level: str = "info"):
        self._channel = channel
        self.session_id = session_id
        self.request_id = request_id
        #: The client's ``_meta.progressToken``; progress is only sent to the client when there is one.
        self.progress_token = progress_token
        #: The Django user of the request (AnonymousUser without authentication).
        self.user = user
        self.client_capabilities = client_capabilities or {}
        self.log_level = log_level
        self._last_progress = None
        self._stopped = False

    def client_extension(self, extension: str) -> Optional[dict]:
        """The settings the client declared for ``extension`` (methods/extensions.py), or None
        when it did not declare it (2025-11-25: at initialize; 2026-07-28: in this request)."""
        return extensions.client_settings(self.client_capabilities, extension)

    @property
    def client_supports_apps(self) -> bool:
        """Whether the client renders MCP Apps (``io.modelcontextprotocol/ui`` with the
        ``text/html;profile=mcp-app`` MIME type): else a tool's text ``content`` is all it shows."""
        return apps.client_supports(self.client_capabilities)

    @property
    def cancelled(self) -> bool:
        return self._channel.cancelled or self._stopped

    def check_cancelled(self) -> None:
        if self._channel.cancelled:
            raise ToolCancelled(f"Request {self.request_id!r} was cancelled by the client.")
        if self._stopped:
            raise ToolCancelled(f"Request {self.request_id!r} ran longer than TOOL_MAX_SECONDS and was stopped.")

    def stop(self) -> None:
        """The call has been answered without this tool (it ran too long): a tool that checks
        ``cancelled`` stops, and whatever it returns is dropped."""
        self._stopped = True

    async def report_progress(self, progress: float, total: Optional[float] = None,
                              message: Optional[str] = None) -> None:
        """"The progress value MUST increase with each notification, even if the total is
        unknown." -- spec 2025-11-25 basic/utilities/progress. A value that does not increase is
        dropped (and logged) rather than sent. The operators' view of a background job (its row,
        the admin's progress bar) gets every report; the client only with its progress token."""
        if self._last_progress is not None and progress <= self._last_progress:
            logger.warning("progress %s after %s dropped: progress must increase", progress, self._last_progress)
            return
        self._last_progress = progress
        if self.progress_token is not None:
            params = {"progressToken": self.progress_token, "progress": progress}
            if total is not None:
                params["total"] = total
            if message is not None:
                params["message"] = message
            # First: a sync tool's reports are appended in call order only before their first await.
            await self._channel.notify("notifications/progress", params)
        observe = getattr(self._channel, "observe_progress", None)  # a job's channel: its row
        if observe is not None:
            await observe(progress, total, message)

    async def log(self, level: str, data: Any, logger_name: Optional[str] = None) -> None:
        """Send ``notifications/message`` if ``level`` is at or above the session's level."""
        if LOG_LEVELS.index(level) < LOG_LEVELS.index(self.log_level):
            return
        params = {"level": level, "data": data}
        if logger_name is not None:
            params["logger"] = logger_name
        await self._channel.notify("notifications/message", params)

    # The helpers below call ``Context.log`` / ``Context.send_request`` rather than ``self.…``:
    # on a SyncContext ``self.log`` is the blocking wrapper, which cannot run on the event loop.

    async def debug(self, data, logger_name=None):
        await Context.log(self, "debug", data, logger_name)

    async def info(self, data, logger_name=None):
        await Context.log(self, "info", data, logger_name)

    async def warning(self, data, logger_name=None):
        await Context.log(self, "warning", data, logger_name)

    async def error(self, data, logger_name=None):
        await Context.log(self, "error", data, logger_name)

    #: Whether an unanswered question of a 2026-07-28 round parks this handler (async) or
    #: ends the round at once (sync: a blocked thread cannot be cancelled). rounds.py.
    parks = True

    async def send_request(self, method: str, params: Optional[dict] = None,
                           capability: Optional[str] = None, *, key: Optional[str] = None,
                           answerable_ahead: bool = False) -> dict:
        """Send a request to the client and wait for its result: on this call's stream
        (2025-11-25), or as an entry of an ``InputRequiredResult`` (2026-07-28, where ``key`` names
        it in ``inputRequests``; by default questions are numbered in the order they are asked).

        ``answerable_ahead`` (2026-07-28; with a ``key``): the question also takes a valid answer
        the client gave under ``key`` before it was asked (a first request's ``inputResponses``),
        instead of asking. Never for a question that guards an action (a confirmation): anyone
        can send an answer ahead without being shown the question. Ignored in 2025-11-25, where
        the client is asked directly.

        "Both parties MUST ... Only use capabilities that were successfully negotiated"
        -- spec 2025-11-25 basic/lifecycle
        """
        if answerable_ahead and not key:
            raise ValueError(f"{method}: answerable_ahead needs a key of the tool's choosing (a numbered key cannot "
                             "be known before the question is asked).")
        if capability and capability not in self.client_capabilities:
            raise ClientCapabilityError(f"The client did not declare the {capability!r} capability.")
        try:
            # A sync tool's thread waits without its tool thread slot (threads.py).
            return await threads.client_wait(lambda: self._channel.request(
                method, params or {}, key=key, park=self.parks, answerable_ahead=answerable_ahead))
        except threads.TooManyWaiting as exc:
            raise ClientRequestError(method, str(exc)) from None

    async def sample(self, messages: list, *, max_tokens: int, key: Optional[str] = None,
                     answerable_ahead: bool = False, **params) -> dict:
        """``sampling/createMessage``; ``messages`` may be plain strings (user text)."""
        messages = [{"role": "user", "content": {"type": "text", "text": m}} if isinstance(m, str) else m
                    for m in messages]
        return await Context.send_request(self, "sampling/createMessage",
                                          {"messages": messages, "maxTokens": max_tokens, **params}, "sampling",
                                          key=key, answerable_ahead=answerable_ahead)

    async def elicit(self, message: str, requested_schema: dict, *, key: Optional[str] = None,
                     answerable_ahead: bool = False) -> dict:
        """``elicitation/create`` (form mode); returns ``{"action": ..., "content": ...}``. An
        answer given ahead (``answerable_ahead``, send_request) counts only if its ``content``
        fits ``requested_schema``."""
        return await Context.send_request(self, "elicitation/create",
                                          {"message": message, "requestedSchema": requested_schema},
                                          "elicitation", key=key, answerable_ahead=answerable_ahead)

    async def list_roots(self, *, key: Optional[str] = None, answerable_ahead: bool = False) -> list:
        result = await Context.send_request(self, "roots/list", {}, "roots", key=key,
                                            answerable_ahead=answerable_ahead)
        return result.get("roots", [])

    async def run_as_task(self, tool: str, **arguments) -> None:
        """Hand the rest of the work to the background tool ``tool``, as a task: the call ends
        now with its ``CreateTaskResult`` (the tasks extension of 2026-07-28: "A tool that
        gathers input via the SEP-2322 MRTR loop and then escalates to async on the final round
        MUST return a CreateTaskResult on that final round"). A client that did not declare the
        extension gets -32021; in the 2025-11-25 era the call gets an error result. A call hands
        its work to one task: a second ``run_as_task`` ends the call with the first one's task
        while it is being created (``asyncio.gather``), and raises RuntimeError after."""
        start = getattr(self._channel, "start_task", None)
        if start is None:
            raise ClientCapabilityError("Only a 2026-07-28 client with the tasks extension can be handed a task.")
        raise TaskStarted(await start(tool, arguments))

    async def close_stream(self, retry_ms: Optional[int] = None) -> None:
        """Close this call's SSE connection now; the client resumes with GET + Last-Event-ID.

        "the server MAY close the connection (without terminating the SSE stream) at any time"
        -- spec 2025-11-25 basic/transports (SEP-1699 polling)."""
        await self._channel.close_stream(retry_ms)


#: The SyncContext methods that wait for the client's answer (minutes, CLIENT_REQUEST_TIMEOUT).
WAITS_FOR_CLIENT = frozenset({"send_request", "sample", "elicit", "list_roots"})

#: Whether sync code's threads close and check their database connections around a call (and
#: before waiting for a client). A test client turns it off, as Django's test Client disconnects
#: close_old_connections: a test's data lives in its connection (an in-memory SQLite database,
#: a transaction), and pytest-django refuses a non-database test that touches one a thread kept.
manage_connections = contextvars.ContextVar("mcp_manage_db_connections", default=True)


def release_database_connections() -> None:
    """Close this thread's database connections, but one inside a transaction.

    A sync tool waiting for its client holds its OS thread, and a process has up to
    SYNC_WAITING_THREADS of them: had each kept the connection of a query made before it asked,
    one client's unanswered questions could take the database's max_connections from everyone.
    The tool's next query connects again (as after CONN_MAX_AGE)."""
    if not manage_connections.get():
        return
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close()


def make_sync_method(method_name, run=None):
    """A blocking version of the Context method ``method_name``: ``run(coroutine)`` runs it on
    the loop that owns the channel (by default async_to_sync: the loop of the calling request)."""
    async_method = getattr(Context, method_name)
    waits_for_client = method_name in WAITS_FOR_CLIENT

    def method(self, *args, **kwargs):
        if waits_for_client:
            release_database_connections()
        if run is None:
            return async_to_sync(async_method)(self, *args, **kwargs)
        return run(async_method(self, *args, **kwargs))
    method.__name__ = method_name
    method.__doc__ = async_method.__doc__
    return method


class SyncContext(Context):
    """The same API for sync tools, which run in a worker thread."""

    parks = False

    for _name in ("report_progress", "log", "debug", "info", "warning", "error", "send_request", "sample",
                  "elicit", "list_roots", "run_as_task", "close_stream"):
        locals()[_name] = make_sync_method(_name)
    del _name
