"""Tools an operator switched off at runtime (the admin's catalog, docs/discovery.md): absent
from every list and search and refused as unknown (auth.may_use), on every process.

The set lives in Redis (one key, ``keys().tools_off()``); each process keeps a copy, read when
it starts and again whenever a ``tools_switched`` control message says the set changed (one
round trip, so every process has it within a second). Reading the copy costs no I/O: it is
asked for every tool of every list.
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


def load() -> None:
    """Read the set now (a process starting, sync); Redis away: logged, the copy stays as it is."""
    from ..connections import sync_redis

    try:
        _keep(sync_redis().smembers(keys().tools_off()))
    except Exception:  # noqa: BLE001 -- a process must start without Redis; the next message reloads
        logger.warning("could not read the tools switched off; none is, until the next switch", exc_info=True)


async def reload() -> None:
    try:
        _keep(await async_redis().smembers(keys().tools_off()))
    except Exception:  # noqa: BLE001
        logger.warning("could not read the tools switched off after a switch", exc_info=True)


def heard(_name: str) -> None:
    """A ``tools_switched`` message reached this process (on its event loop): read the set again."""
    asyncio.get_running_loop().create_task(reload())


def listen() -> None:
    """Read the set, and again on every switch (apps.py)."""
    control.on_message(KIND, heard)
    load()
