"""Tools an operator switched off at runtime (the admin's catalog, docs/discovery.md): absent
from every list and search and refused as unknown (auth.may_use), on every process.

The set lives in Redis (one key, ``keys().tools_off()``); each process keeps a copy, read when
its event loop subscribes to the control channel (before its first request is served, and again
after the channel was lost: a switch may have been missed) and whenever a ``tools_switched``
control message says the set changed (one round trip, so every process has it within a
second). Reading the copy costs no I/O: it is asked for every tool of every list.
"""
import asyncio
import logging

from ..connections import async_redis, keys, publish
from . import control

logger = logging.getLogger(__name__)

KIND = "tools_switched"
_off = frozenset()


def is_off(name: str) -> bool:
    return name in _off


def off() -> frozenset:
    return _off


def _keep(names) -> frozenset:
    global _off
    _off = frozenset(name.decode() if isinstance(name, bytes) else name for name in names)
    return _off


def switch(name: str, on: bool) -> frozenset:
    """Switch ``name`` on or off for every process (sync: the admin's view); returns the set."""
    from ..connections import sync_redis

    client, key = sync_redis(), keys().tools_off()
    (client.srem if on else client.sadd)(key, name)
    names = _keep(client.smembers(key))
    publish(client, keys().control_channel(), control.message(KIND, "*"))
    return names


async def reload() -> None:
    """Read the set again; Redis away: logged, the copy stays as it is (the next switch, or the
    next subscription, reads it again)."""
    try:
        _keep(await async_redis().smembers(keys().tools_off()))
    except Exception:  # noqa: BLE001 -- a request must not fail for it
        logger.warning("could not read the tools switched off", exc_info=True)


def heard(_name: str) -> None:
    """A ``tools_switched`` message reached this process (on its event loop): read the set again."""
    asyncio.get_running_loop().create_task(reload())


def listen() -> None:
    """Read the set when the process subscribes, and again on every switch (apps.py)."""
    control.on_message(KIND, heard)
    control.on_subscribed(reload)
