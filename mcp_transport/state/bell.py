"""Doorbells: Redis pub/sub, one connection per process, fanned out in-process.

A doorbell only says "look again": the event store stays the source of truth. Whoever waits
subscribes first and reads the store second, so nothing appended in between is missed, and
waits time out to a fallback read, so a lost doorbell delays an event but never loses it.
"""
import asyncio
import collections
import logging
import weakref

from ..connections import async_redis

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
    def __init__(self):
        self._pubsub = None
        self._reader = None
        self._lock = asyncio.Lock()
        self._listeners = {}
        self._confirmed = {}

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
        waiters = [self._confirmed.setdefault(c, asyncio.get_running_loop().create_future()) for c in channels]
        # One at a time: redis-py's PubSub connects on its first command, and two concurrent
        # first commands would each take a connection, orphaning one subscription.
        async with self._lock:
            if self._pubsub is None:
                self._pubsub = async_redis().pubsub()
            await self._pubsub.subscribe(*channels)
            if self._reader is None or self._reader.done():
                self._reader = asyncio.create_task(self._read())
        return waiters

    async def unsubscribe(self, subscription, channels=None):
        gone = []
        for channel in subscription.channels if channels is None else channels:
            listeners = self._listeners.get(channel)
            if listeners is not None:
                listeners.discard(subscription)
                if not listeners:
                    del self._listeners[channel]
                    gone.append(channel)
        if gone and self._pubsub is not None:
            try:
                async with self._lock:
                    await self._pubsub.unsubscribe(*gone)
            except Exception:  # the connection is gone; its subscriptions went with it
                logger.debug("unsubscribe failed", exc_info=True)

    async def _read(self):
        try:
            async for message in self._pubsub.listen():
                self._dispatch(message)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("doorbell reader stopped; waiters fall back to polling")
            self._reset()

    def _dispatch(self, message):
        kind, channel = message["type"], message["channel"]
        if kind == "subscribe":
            waiter = self._confirmed.pop(channel, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(True)
        elif kind == "message":
            for subscription in tuple(self._listeners.get(channel, ())):
                subscription._deliver(channel, message["data"])

    def _reset(self):
        self._pubsub, self._reader = None, None
        channels = list(self._listeners)
        self._confirmed.clear()
        if channels:
            asyncio.get_running_loop().create_task(self._resubscribe(channels))

    async def _resubscribe(self, channels):
        try:
            await asyncio.wait_for(asyncio.gather(*await self._subscribe(channels)), 5)
        except Exception:
            logger.exception("doorbell resubscribe failed")


_bells = weakref.WeakKeyDictionary()


def doorbell() -> Doorbell:
    """The doorbell of the running event loop."""
    loop = asyncio.get_running_loop()
    bell = _bells.get(loop)
    if bell is None:
        bell = _bells[loop] = Doorbell()
    return bell
