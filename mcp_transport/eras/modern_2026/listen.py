"""``subscriptions/listen``, which replaces the GET stream in 2026-07-28: the list-changed and
resource-updated notifications reach it through a Redis doorbell from any process (notify.py
rings it). It runs as any streamed call does (running/pipeline.py): its notifications go on
the call's channel, and its result ends the stream.
"""
import asyncio
import collections
import json

from ... import auth
from ...conf import get_config
from ...connections import keys
from ...methods import dispatch, notify
from ...protocol import modern
from ...protocol.errors import LimitReached
from ...protocol.jsonrpc import notification_message
from ...running import drain
from ...state import metrics
from ...state.bell import doorbell

#: Open subscriptions/listen streams of this process, per caller key (``call.caller``).
_open_listens = collections.Counter()


#: (user id, URI) -> (the change heard, the task checking it): the listens of one user in this
#: process that hear one change share one check of it (the doorbell gives each the same string).
_checks = collections.OrderedDict()
#: Checks kept at most: older ones go first.
CHECKS_KEPT = 1024


async def _may_hear(message, heard, call) -> bool:
    """Whether the listener may still read the resource an update is about, checked when it is
    delivered (notify.may_read: a permission, a group or the row taken away since it listened
    stops the updates); ``heard`` is the doorbell's message, shared by every listen of the process."""
    if message["method"] != "notifications/resources/updated":
        return True
    uri, user = message["params"]["uri"], getattr(call.principal, "user", None)
    key = (getattr(user, "pk", None), uri)
    found = _checks.get(key)
    if found is None or found[0] is not heard or found[1].get_loop() is not asyncio.get_running_loop():
        found = _checks[key] = (heard, asyncio.ensure_future(notify.may_read(uri, user, call)))
        _checks.move_to_end(key)
        while len(_checks) > CHECKS_KEPT:
            _checks.popitem(last=False)
    return await asyncio.shield(found[1])


async def listen(params, call, capabilities: dict) -> dict:
    """"The first message MUST be notifications/subscriptions/acknowledged"; every notification
    after it carries the subscription id (the listen request's id) in its _meta, and only the
    types the client asked for go out.

    A listen holds its filter in this process for up to LISTEN_MAX_SECONDS: its resource
    subscriptions obey the caps of resources/subscribe, and one caller holds at most
    MAX_LISTENS_PER_CALLER open listens here, both checked before anything is held. The cap is
    per process because what it bounds is: the memory of the process holding the streams."""
    config = get_config()
    try:
        honored = modern.honored_filter(params.get("notifications"), capabilities,
                                        config["MAX_SUBSCRIPTIONS_PER_SESSION"], config["MAX_URI_BYTES"])
    except modern.SubscriptionLimit as exc:
        metrics.incr(f"limit_refusals:{exc.limit}")
        raise
    caller, limit = call.caller.key, config["MAX_LISTENS_PER_CALLER"]
    if _open_listens[caller] >= limit:
        metrics.incr("limit_refusals:listens_per_caller")
        raise LimitReached(f"This client already holds {limit} open listens: close one first.", retry_after=1)
    # No listening to a resource the caller may not read: answered as resources/read answers it.
    await dispatch.require_readable(honored.get("resourceSubscriptions", ()), call)
    _open_listens[caller] += 1
    try:
        return await follow_changes(call.channel, honored, {modern.META_SUBSCRIPTION_ID: call.channel.request_id},
                                    call)
    finally:
        _leave_listen(caller)


def _leave_listen(caller) -> None:
    _open_listens[caller] -= 1
    if _open_listens[caller] <= 0:
        del _open_listens[caller]


async def follow_changes(channel, honored, tag, call) -> dict:
    """Relay changes until the client leaves, LISTEN_MAX_SECONDS pass, the token it listens
    with expires or is revoked, or the process stops (then end gracefully: the client listens again, perhaps on
    another process, or gets the 401 that sends it for a new token). Subscribed before the
    acknowledgment, so no change made after the client saw it can be missed."""
    limit = get_config()["LISTEN_MAX_SECONDS"]
    loop = asyncio.get_running_loop()
    deadline = None if limit is None else loop.time() + limit
    async with doorbell().listen(keys().listen_bell()) as subscription:
        token_ended = asyncio.Event()  # or the process stops (drain.py): listen again elsewhere

        def end():
            token_ended.set()
            subscription.wake()
        stop_watching, stop_waiting = auth.watch_token(call.principal, end), drain.when_draining(end)
        try:
            await channel.reply.send(notification_message("notifications/subscriptions/acknowledged",
                                                          {"notifications": honored, "_meta": tag}))
            while not token_ended.is_set() and (deadline is None or loop.time() < deadline):
                rang = await subscription.wait(None if deadline is None else deadline - loop.time())
                if rang is None or rang[0] is None:  # the deadline, the token's end, or subscribed again after a reconnect
                    continue
                message = json.loads(rang[1])
                if modern.wanted(honored, message["method"], message.get("params")) \
                        and await _may_hear(message, rang[1], call):
                    params = {**(message.get("params") or {}), "_meta": tag}
                    await channel.reply.send(notification_message(message["method"], params))
        finally:
            stop_watching()
            stop_waiting()
    # Graceful end: "the server SHOULD send {id, result:{resultType:"complete", _meta:{subscriptionId}}}".
    return {"resultType": "complete", "_meta": tag}
