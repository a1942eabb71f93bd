"""Running the project's code (a tool, resource, prompt, completer, lister): an async function
on the loop, a sync one in a thread of its owner's share (threads.py) with fresh database
connections; and the Context such a function gets (``make_context``).
"""
import inspect

from django.db import close_old_connections, connections

from . import threads
from ..conf import get_config
from .database_time import DEFAULT_STATEMENT_TIMEOUT, QueryGuard
from .context import Context, SyncContext, manage_connections, release_database_connections


async def run_sync_or_async(func, args=(), kwargs=None, *, call=None, lane=threads.HANDLERS, calls_back=False,
                            statement_timeout=DEFAULT_STATEMENT_TIMEOUT, is_async=None):
    """Await an async function; run a sync one in a thread of ``lane``, in the shares of the
    call's owner (its session, else its caller) and of its caller (threads.py: one owner's or
    caller's waiting never blocks another's; a sessionless call is not nobody's); it may use the
    ORM, each statement bounded by ``statement_timeout`` seconds and cancelled with the call
    (database_time.py).

    ``calls_back``: the function uses a SyncContext (its methods hop back onto this loop).
    ``is_async``: whether it is a coroutine function, when the caller knows (a ToolSpec does)."""
    if inspect.iscoroutinefunction(func) if is_async is None else is_async:
        return await func(*args, **(kwargs or {}))
    owner = threads.owner_of(_owner(call))
    if statement_timeout is DEFAULT_STATEMENT_TIMEOUT:
        statement_timeout = get_config()["STATEMENT_TIMEOUT_SECONDS"]
    guard = QueryGuard(statement_timeout)
    return await threads.run(lane, owner, _with_fresh_connections(guard.wrap(func)), args, kwargs,
                             calls_back=calls_back, caller=waiting_caller(call), on_cancel=guard.cancel)


def _owner(call):
    if call is None:
        return None
    if call.owner is not None:
        return call.owner
    return call.session.id if call.session is not None else None


def waiting_caller(call):
    """Whose share of the process's threads, and of its waits for clients, a call's sync code
    takes: its principal when authorization is on, else its client address (the request's, or
    the one its session was opened from; None: the call has neither, and only its session's
    share and the process's bound apply)."""
    if call is None:
        return None
    if call.caller is not None:
        return call.caller.key or None
    key = getattr(call.principal, "key", "") if call.principal is not None else ""
    if key:
        return f"principal:{key}"
    address = call.address or (getattr(call.session, "address", "") if call.session is not None else "")
    return f"address:{address}" if address else None


def _holds_a_connection() -> bool:
    return any(wrapper.connection is not None for wrapper in connections.all(initialized_only=True))


def _with_fresh_connections(func):
    def run(*args, **kwargs):
        if not manage_connections.get():
            return func(*args, **kwargs)
        close_old_connections()
        try:
            return func(*args, **kwargs)
        finally:
            close_old_connections()
            if not threads.connection_keepers.may_keep() and _holds_a_connection():  # 1 µs, then 7
                release_database_connections()
    return run


def make_context(spec, params, call):
    meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
    context_class = Context if spec.is_async else SyncContext
    return context_class(channel=call.channel, session_id=call.session.id, request_id=call.channel.request_id,
                         progress_token=meta.get("progressToken"), user=call.user,
                         client_capabilities=call.session.client_capabilities, log_level=call.session.log_level)
