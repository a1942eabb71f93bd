"""Doorbells: Redis pub/sub, one connection per process, fanned out in-process.

A doorbell only says "look again": the event store stays the source of truth. Whoever waits
subscribes first and reads the store second, so nothing appended in between is missed, and
waits time out to a fallback read, so a lost doorbell delays an event but never loses it.
"""
import asyncio
import collections
import logging
import weakref

import redis.asyncio as aredis
from redis.backoff import NoBackoff

from ..connections import async_redis, connection_options, is_cluster, redis_target, retry_policy

logger = logging.getLogger(__name__)


class Subscription:
    """Messages published on some channels, queued until ``wait()`` takes them.

    Thousands are open at once (one per live stream), so it is kept small: a deque and, only
    while someone waits, a future (no ``asyncio.Queue``, no task per wait)."""

    __slots__ = ("_bell", "channels", "_messages", "_waiter")

    def __init__(self, bell, channels):
        self._bell = bell
        self.channels = tuple(channels)
        self._messages = collections.deque()
        self._waiter = None

    def _deliver(self, channel, data):
        self._messages.append((channel, data))
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def wake(self) -> None:
        """End the current (or next) ``wait`` now with ``(None, None)``: its waiter has a reason
        of its own to look again (the request behind it was cancelled)."""
        self._deliver(None, None)

    async def wait(self, timeout):
        """The next (channel, data), or None after ``timeout`` seconds (None: no limit)."""
        if not self._messages:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                async with asyncio.timeout(timeout):
                    await self._waiter
            except TimeoutError:
                return None
            finally:
                self._waiter = None
        return self._messages.popleft()

    async def open(self) -> "asyncio.Future":
        """Send the SUBSCRIBE and return without waiting for Redis to confirm it. The future
        resolves on confirmation: from then on, every PUBLISH on the channels reaches us."""
        return await self._bell.subscribe(self)

    async def __aenter__(self):
        await asyncio.wait_for(await self.open(), 5)
        return self

    async def add(self, *channels) -> "asyncio.Future":
        """Listen to more channels (a connection that follows a changing set of streams); the
        future resolves once Redis confirmed them."""
        fresh = tuple(dict.fromkeys(c for c in channels if c not in self.channels))
        self.channels += fresh
        return await self._bell.subscribe(self, fresh)

    async def remove(self, *channels) -> None:
        """Stop listening to some channels; messages of theirs already queued stay queued."""
        self.channels = tuple(c for c in self.channels if c not in channels)
        await self._bell.unsubscribe(self, channels)

    async def __aexit__(self, *exc):
        await self._bell.unsubscribe(self)


class Doorbell:
    """The pub/sub connections of one event loop, and who listens to which channel.

    One connection on a single Redis (or a Sentinel's master); on a Cluster one per node that
    owns a subscribed channel's slot, with SSUBSCRIBE (sharded pub/sub: ``connections.publish``
    sends SPUBLISH). A connection that fails (Redis restarted, a failover, a slot that moved) is
    replaced, and its channels subscribed again, with back-off for as long as anyone listens:
    a stream or the control channel that silently stopped hearing would wait for ever. After
    any re-subscription every listener of those channels is woken, since what was published
    meanwhile is gone and the store must be read again."""

    #: Seconds between attempts to subscribe again: doubling from the first to the last.
    RESUBSCRIBE_BACKOFF = (0.05, 2.0)

    def __init__(self):
        self._lock = asyncio.Lock()
        self._listeners = {}
        self._confirmed = {}
        #: shard name (a Cluster node's "host:port", None elsewhere) -> _Shard
        self._shards = {}
        self._shard_of = {}
        self._recovering = None

    def listen(self, *channels) -> Subscription:
        """``async with bell.listen(a, b) as sub:`` subscribes before the body runs."""
        return Subscription(self, channels)

    async def subscribe(self, subscription, channels=None) -> "asyncio.Future":
        """Add the listener (to ``channels``, by default all of its own); the returned future
        resolves once Redis confirmed every channel (channels another listener already has are
        confirmed, or pending with its confirmation)."""
        channels = subscription.channels if channels is None else channels
        new = [c for c in channels if c not in self._listeners]
        pending = [self._confirmed[c] for c in channels if c in self._confirmed and c not in new]
        for channel in channels:
            self._listeners.setdefault(channel, set()).add(subscription)
        if new:
            pending += await self._subscribe(new)
        return asyncio.ensure_future(asyncio.gather(*pending))

    async def _subscribe(self, channels):
        loop = asyncio.get_running_loop()
        waiters = [self._confirmed.setdefault(c, loop.create_future()) for c in channels]
        # One at a time: redis-py's PubSub connects on its first command, and two concurrent
        # first commands would each take a connection, orphaning one subscription.
        async with self._lock:
            for name, group in (await self._by_shard(channels)).items():
                shard = self._shards.get(name)
                if shard is None:
                    shard = self._shards[name] = _Shard(self, name)
                for channel in group:
                    self._shard_of[channel] = name
                await shard.subscribe(group)
        return waiters

    async def _by_shard(self, channels) -> dict:
        client = async_redis()
        if not is_cluster():
            return {None: list(channels)}
        if not client.get_nodes():
            await client.initialize()
        groups = {}
        for channel in channels:
            groups.setdefault(client.get_node_from_key(channel).name, []).append(channel)
        return groups

    async def unsubscribe(self, subscription, channels=None):
        gone = []
        for channel in subscription.channels if channels is None else channels:
            listeners = self._listeners.get(channel)
            if listeners is not None:
                listeners.discard(subscription)
                if not listeners:
                    del self._listeners[channel]
                    gone.append(channel)
        by_shard = {}
        for channel in gone:
            by_shard.setdefault(self._shard_of.pop(channel, None), []).append(channel)
        for name, group in by_shard.items():
            shard = self._shards.get(name)
            if shard is None:
                continue
            try:
                async with self._lock:
                    await shard.unsubscribe(group)
            except Exception:  # the connection is gone; its subscriptions went with it
                logger.debug("unsubscribe failed", exc_info=True)

    def _dispatch(self, message):
        kind, channel = message["type"], message["channel"]
        if kind in ("subscribe", "ssubscribe"):
            waiter = self._confirmed.pop(channel, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(True)
            elif waiter is None:
                # redis-py subscribed again by itself after a reconnect: whatever was
                # published while it was away is lost, so its listeners look again.
                self._wake([channel])
        elif kind in ("message", "smessage"):
            for subscription in tuple(self._listeners.get(channel, ())):
                subscription._deliver(channel, message["data"])

    def _wake(self, channels):
        woken = {subscription for channel in channels for subscription in self._listeners.get(channel, ())}
        for subscription in woken:
            subscription.wake()

    def _lost(self, shard):
        """A shard's connection failed: forget it, and subscribe its channels again."""
        if self._shards.get(shard.name) is shard:
            del self._shards[shard.name]
        channels = [c for c, name in self._shard_of.items() if name == shard.name]
        for channel in channels:  # a confirmation still awaited comes with the new subscription
            del self._shard_of[channel]
        if self._recovering is None or self._recovering.done():
            self._recovering = asyncio.get_running_loop().create_task(self._resubscribe())

    async def _resubscribe(self):
        """Subscribe every listened channel that has no connection, until it works."""
        delay, longest = self.RESUBSCRIBE_BACKOFF
        while True:
            orphans = [c for c in self._listeners if c not in self._shard_of]
            if not orphans:
                return
            try:
                if is_cluster():  # the slot may have a new owner: ask the Cluster again
                    await async_redis().initialize()
                await asyncio.wait_for(asyncio.gather(*await self._subscribe(orphans)), 5)
            except Exception as exc:
                logger.warning("doorbell resubscribe failed (%s); retrying in %.2f s", exc, delay)
                for channel in orphans:
                    self._shard_of.pop(channel, None)
                await asyncio.sleep(delay)
                delay = min(delay * 2, longest)
                continue
            logger.info("doorbell subscribed again to %d channels", len(orphans))
            self._wake(orphans)


class _Shard:
    """One pub/sub connection and the task that reads it."""

    def __init__(self, bell, name):
        self.bell, self.name = bell, name
        self.sharded = name is not None
        self.pubsub = _node_client(name).pubsub() if self.sharded else async_redis().pubsub()
        self.reader = None

    async def subscribe(self, channels):
        try:
            await (self.pubsub.ssubscribe if self.sharded else self.pubsub.subscribe)(*channels)
        except Exception:
            self._fail()
            raise
        if self.reader is None or self.reader.done():
            self.reader = asyncio.create_task(self._read())

    async def unsubscribe(self, channels):
        await (self.pubsub.sunsubscribe if self.sharded else self.pubsub.unsubscribe)(*channels)

    async def _read(self):
        try:
            async for message in self.pubsub.listen():
                if message["type"] == "sunsubscribe" and message["channel"] in self.bell._shard_of:
                    raise ConnectionError(f"{message['channel']} moved to another node")  # slot migrated
                self.bell._dispatch(message)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.warning("doorbell connection lost (%s); subscribing again", exc)
        else:
            logger.warning("doorbell connection ended; subscribing again")
        self._fail()

    def _fail(self):
        asyncio.ensure_future(self._close())
        self.bell._lost(self)

    async def _close(self):
        try:
            await self.pubsub.aclose()
        except Exception:
            logger.debug("closing a lost pub/sub connection failed", exc_info=True)


def _node_client(name):
    """A plain client of one Cluster node (its pub/sub connection: SSUBSCRIBE goes to the node
    that owns the channel's slot, not through the Cluster client's routing)."""
    host, _, port = name.rpartition(":")
    # No retries of its own: once a node is gone the Doorbell asks the Cluster who owns the slot now.
    options = {**connection_options(), "retry": retry_policy(NoBackoff(), 0), **redis_target().options}
    return aredis.Redis(host=host, port=int(port), decode_responses=True, **options)


_bells = weakref.WeakKeyDictionary()


def doorbell() -> Doorbell:
    """The doorbell of the running event loop."""
    loop = asyncio.get_running_loop()
    bell = _bells.get(loop)
    if bell is None:
        bell = _bells[loop] = Doorbell()
    return bell
