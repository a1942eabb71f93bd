"""Server-initiated notifications: they go on each session's standalone GET stream.

"The server MAY send JSON-RPC requests and notifications on the stream. These messages SHOULD
be unrelated to any concurrently-running JSON-RPC request." -- spec 2025-11-25 basic/transports

Call the sync functions from Django code or Celery tasks, the async ones from async code:

    from mcp_transport.methods.notify import resource_updated_sync, list_changed_sync
    resource_updated_sync("file:///reports/today.csv")
    list_changed_sync("tools")
"""
import asyncio
import logging
from datetime import timedelta

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.utils import timezone

from django.contrib.auth.models import AnonymousUser

from .. import auth
from ..auth.callers import Caller
from ..state import quotas
from ..conf import get_config
from ..connections import async_redis, keys, publish
from ..models import McpSession
from ..protocol.ids import GET_STREAM
from ..protocol.jsonrpc import dumps, notification_message
from ..protocol.errors import ResourceNotFound
from ..protocol.session import SessionState
from ..state.sessions import SessionRecord, side_key_ttl
from ..storage import get_event_store
from .context import Context
from .invoke import run_sync_or_async
from .registry import registry

logger = logging.getLogger(__name__)

LIST_KINDS = ("tools", "resources", "prompts")

#: Appends in flight at once when a notification goes to every open session: they overlap (the
#: Redis store sends concurrent appends as one script call) instead of one round trip each,
#: and a thousand sessions do not take every connection of the pool at once.
FAN_OUT = 64


async def subscribe(session_id: str, uri: str) -> None:
    """Both sets live as long as the session is used (sessions renew them), then expire; a
    session holds at most MAX_SUBSCRIPTIONS_PER_SESSION URIs (InvalidParams above it)."""
    await quotas.subscribe(session_id, uri, side_key_ttl())


async def unsubscribe(session_id: str, uri: str) -> None:
    names = keys()
    async with async_redis().pipeline(transaction=False) as pipe:
        pipe.srem(names.subscriptions(session_id), uri)
        pipe.srem(names.uri_subscribers(uri), session_id)
        await pipe.execute()


async def resource_updated(uri: str) -> int:
    """Send notifications/resources/updated to every session subscribed to ``uri`` that may
    still read it (``may_read``: a row that became another user's tells its old reader nothing).

    Whoever saved the row waits for this, so its cost must not grow with what subscribers do:
    the subscribers' sessions are read in one MGET, readability is checked once per user (a
    thousand sessions of one user subscribed to a public row cost one check, not a thousand),
    and the appends overlap FAN_OUT at a time."""
    names = keys()
    client = async_redis()
    message = notification_message("notifications/resources/updated", {"uri": uri})
    await _ring_listeners(message)
    session_ids = list(await client.smembers(names.uri_subscribers(uri)))
    if not session_ids:
        return 0
    raws = await client.mget([names.session(session_id) for session_id in session_ids])
    gone = [session_id for session_id, raw in zip(session_ids, raws) if raw is None]
    if gone:
        await client.srem(names.uri_subscribers(uri), *gone)
    readable, targets = {}, []
    for session_id, raw in zip(session_ids, raws):
        if raw is None:
            continue
        user_id = SessionRecord.from_json(raw).user_id
        if user_id not in readable:
            readable[user_id] = await may_read(uri, user_id)
        if readable[user_id]:
            targets.append(session_id)
    await _append_to_all(targets, message)
    return len(targets)


async def _append_to_all(session_ids, message) -> None:
    """Append ``message`` to each session's GET stream, FAN_OUT appends in flight at once."""
    store = get_event_store()
    for start in range(0, len(session_ids), FAN_OUT):
        await asyncio.gather(*(store.append(session_id, GET_STREAM, message)
                               for session_id in session_ids[start:start + FAN_OUT]))


async def may_read(uri: str, user, call=None) -> bool:
    """Whether ``user`` (a user, its id, or None: nobody) may read ``uri`` now, as resources/read
    decides it: the resource's ``permission`` and ``visible`` check (a model toolset's view
    permission), then its own ``readable`` check (ResourceSpec.readable: the toolsets' rows).
    A subscription asks it before each update it delivers, so an update goes to no one who lost
    the permission (or the group that gave it), or the row:

    - the user comes from ``auth.load_user``, its permissions loaded at most
      PERMISSION_CACHE_SECONDS ago (a change of a user's permissions, groups or flags drops every
      process's copy at once: auth/permissions.py), so most checks of the permission are free;
    - the row check queries the database: it runs in a HANDLERS lane thread, in the share of
      ``call`` (a listen's) or of the user (methods/threads.py), never on Channels' one
      thread-sensitive thread, where everyone's token checks would wait behind it.

    A check that fails (the database away, a statement timed out) sends nothing: False."""
    spec, variables = registry.find_resource(uri)
    if spec is None or (spec.permission is None and getattr(spec, "visible", None) is None
                        and spec.readable is None):
        return True  # visibility and scopes were checked on subscribe, and do not change
    user = await _current_user(user)
    if not auth.permitted(spec, _principal_of(user, call)):
        return False
    if spec.readable is None:
        return True
    context = Context(channel=None, session_id=None, request_id=None, user=user)
    try:
        return await run_sync_or_async(_readable, (spec.readable, context, variables), call=call or _Checker(user))
    except Exception:  # noqa: BLE001 -- told to no one rather than to someone who may not read it
        logger.warning("the readability check of %s failed; the update is not sent", uri, exc_info=True)
        return False


async def _current_user(user):
    """The user with its permissions as they are now (PERMISSION_CACHE_SECONDS at most)."""
    user_id = getattr(user, "pk", None) if hasattr(user, "is_authenticated") else user
    if user_id is None:
        return AnonymousUser()
    return await auth.load_user(user_id, max_age=get_config()["PERMISSION_CACHE_SECONDS"] or 0)


def _principal_of(user, call):
    """What ``auth.permitted`` asks about: the call's principal (scopes, key) with the user as it is now."""
    principal = getattr(call, "principal", None)
    if principal is not None:
        return principal.of_request(user, principal.digest, principal.checked_at)
    if getattr(user, "is_authenticated", False):
        return auth.Principal.for_user(user)
    return auth.Principal(user=user)


class _Checker:
    """Whose share of the HANDLERS lane a check without a call takes (a 2025-11-25 subscriber's,
    made by the saving process): its user's."""

    session = None
    address = ""

    def __init__(self, user):
        self.principal = auth.Principal.for_user(user) if getattr(user, "is_authenticated", False) else None
        self.caller = Caller.of(self.principal)
        self.owner = self.caller.key or None


def _readable(readable, context, variables) -> bool:
    try:
        readable(context, **variables)
    except ResourceNotFound:
        return False
    return True


@database_sync_to_async
def _open_session_ids():
    idle = timedelta(seconds=get_config()["SESSION_IDLE_TIMEOUT"])
    return list(McpSession.objects.exclude(state=SessionState.CLOSED.value)
                .filter(last_seen_at__gte=timezone.now() - idle).values_list("id", flat=True))


async def list_changed(kind: str) -> int:
    """Send notifications/{kind}/list_changed to every open session."""
    if kind not in LIST_KINDS:
        raise ValueError(f"kind must be one of {', '.join(LIST_KINDS)}")
    message = notification_message(f"notifications/{kind}/list_changed")
    await _ring_listeners(message)
    session_ids = await _open_session_ids()
    await _append_to_all(session_ids, message)
    return len(session_ids)


async def _ring_listeners(message: dict) -> None:
    """The 2026-07-28 era has no sessions: its subscriptions/listen streams, on any process,
    hear every change on one channel and keep what their filter asks for (eras/modern_2026/listen.py)."""
    await publish(async_redis(), keys().listen_bell(), dumps(message))


resource_updated_sync = async_to_sync(resource_updated)
list_changed_sync = async_to_sync(list_changed)
