"""What a client presenting bad bearer tokens may cost: a bounded number of lookups.

A token that no cache knows costs the validators a lookup (one or two database queries, an
introspection request). Before, a flood of random tokens cost that many lookups, and a user's
first call waited behind them (3.5 -> 94 ms in issue 38). Two bounds now:

- A refused token is remembered in this process for ``AUTH_FAILURE_CACHE_SECONDS`` (``refused``,
  a map of its own, so a flood never pushes out the accepted tokens' entries): a client that
  repeats it (an expired token in a retry loop) costs no lookup. A token that is created later
  with that value works at once: its creation is announced on the control channel
  (tokens.py), and every process forgets the refusal (``forget``); only a process that missed
  the message may refuse it, for at most that long.
- Lookups are counted per client network (``http.network_of``: an IPv4 address, an IPv6 /64)
  in Redis, shared by every process: at most ``AUTH_FAILURES_PER_ADDRESS`` per
  ``AUTH_FAILURE_WINDOW`` seconds. Each is counted before it runs (so concurrent requests cannot
  pass the bound together) and given back when the token was good, so only failures add up.
  Past the bound, a token that no cache knows gets 429 with ``Retry-After`` (the window's end)
  before any lookup; tokens already validated (in memory or Redis) are never refused by it.
"""
from typing import Callable, Optional

from ..conf import get_config
from ..connections import async_redis, keys
from ..protocol import http
from ..protocol.errors import LimitReached
from .users import _Memory

_refused = _Memory()  # token digest -> the resources it was refused for, while AUTH_FAILURE_CACHE_SECONDS lasts
#: Bumped by every ``forget``: a refusal whose lookup began before it is not remembered (the
#: token may have been created while it was looked up).
_generation = 0


def refused(digest: str, resource: str, now: float) -> bool:
    return resource in (_refused.get(digest, now) or ())


def generation() -> int:
    return _generation


def remember(digest: str, resource: str, now: float, since: int) -> None:
    """The token was refused for ``resource`` by a lookup that began at generation ``since``."""
    seconds = get_config()["AUTH_FAILURE_CACHE_SECONDS"]
    if seconds and since == _generation:
        _refused.put(digest, {*(_refused.get(digest, now) or ()), resource}, now + seconds)


def forget(digest: str) -> None:
    """The token was created or changed (the control channel, any thread): look it up again."""
    global _generation
    _generation += 1
    _refused.entries.pop(digest, None)


def clear() -> None:
    _refused.clear()


class Lookup:
    """One lookup's place in its network's count: ``await Lookup.begin(address)`` before it
    (LimitReached past the bound); ``await lookup.give_back()`` when it was no failure."""

    def __init__(self, key: Optional[str]):
        self.key = key

    @classmethod
    async def begin(cls, address: Optional[Callable[[], str]]) -> "Lookup":
        config = get_config()
        bound, window = config["AUTH_FAILURES_PER_ADDRESS"], config["AUTH_FAILURE_WINDOW"]
        if not bound or address is None:
            return cls(None)
        key = keys().auth_failures(http.network_of(address()))
        async with async_redis().pipeline(transaction=False) as pipe:
            pipe.set(key, 0, ex=max(1, round(window)), nx=True)  # the window starts with its first lookup
            pipe.incr(key)
            pipe.pttl(key)
            _, count, left_ms = await pipe.execute()
        if count > bound:
            raise LimitReached(f"Too many invalid tokens from this address: at most {bound} per "
                               f"{window:g} s. Try again later.", retry_after=max(left_ms, 1000) / 1000)
        return cls(key)

    async def give_back(self) -> None:
        """The token was good, or the lookup gave no verdict: it was no failure."""
        if self.key is not None:
            await async_redis().decr(self.key)
