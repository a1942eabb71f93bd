"""Rows' changes as ``resources/updated``: a toolset with ``subscribe = True`` connects the
model's ``post_save`` and ``post_delete`` here, in every process that loads the project (the web
process, a Celery worker, a management command), and each change reaches the subscribers of
the row's URI through Redis (methods/notify.py: the 2025-11-25 GET streams and the 2026-07-28
``subscriptions/listen`` streams).

The notification leaves after the transaction commits (``transaction.on_commit``): a rolled-back
save tells no one, and a subscriber that reads the row on hearing of it reads the new row. It
names the URI only; who may hear of it is checked when they subscribe (dispatch.require_readable)
and again before each update reaches them (notify.may_read: a permission, a group or the row
taken away since stops their updates).

One transaction tells each URI once: a row saved ten times in it is one ``resources/updated``,
and rows created or deleted in it ask once for a ``resources/list_changed`` (``resources/list``
lists the rows). Each change still registers its own ``on_commit`` callback, so a savepoint rolled
back takes its changes' callbacks with it and no change of a committed savepoint is lost; the
callbacks of one transaction share a ``_Batch``, and the first one to run for a URI sends it.

A ``resources/list_changed`` goes to every open session, so the process sends at most one per
``LIST_CHANGED_INTERVAL`` (``_ListChanges``), and the saving thread never waits for it: a
client allowed to create rows would otherwise make each of its creates cost one append per open
session before its own call could return. A ``resources/updated`` costs one append per
subscriber of the row, and is still waited for (errors reach Django's log of the callback).
"""
import asyncio
import atexit
import concurrent.futures
import concurrent.futures.thread  # its exit hook first: ours must run before it (below)
import logging
import os
import threading

from django.db import connections, transaction
from django.db.models.signals import post_delete, post_save

from ..methods import notify

#: The batch key of ``notifications/resources/list_changed``, beside the rows' URIs.
LIST_CHANGED = "resources/list_changed"

#: Seconds between two row-driven ``resources/list_changed`` broadcasts of one process. The
#: first change after a quiet spell is told at once; changes in the window after a broadcast
#: are told together, once, at its end.
LIST_CHANGED_INTERVAL = 1.0

#: How long a process that exits (a management command, a cron job) waits for its last
#: ``list_changed`` to go out.
LIST_CHANGED_EXIT_WAIT = 10

logger = logging.getLogger(__name__)


def notify_changes(model, template: str) -> None:
    """Notify the subscribers of ``template``'s row (``{pk}``) on each save and delete of ``model``."""
    uid = f"mcp_transport.toolsets.subscriptions:{template}"
    post_save.connect(_Changes(template).saved, sender=model, weak=False, dispatch_uid=uid)
    post_delete.connect(_Changes(template).deleted, sender=model, weak=False, dispatch_uid=uid)


class _Changes:
    def __init__(self, template: str):
        self.template = template

    def saved(self, sender, instance, created=False, using=None, **kwargs):
        self._changed(instance, using, listed=created)

    def deleted(self, sender, instance, using=None, **kwargs):
        self._changed(instance, using, listed=True)

    def _changed(self, instance, using, listed: bool):
        batch = _Batch.current(using or "default")
        # robust: Redis being away must not turn a committed save into an exception in its caller.
        transaction.on_commit(batch.sender(self.template.replace("{pk}", str(instance.pk))), using=using,
                              robust=True)
        if listed:
            transaction.on_commit(batch.sender(LIST_CHANGED), using=using, robust=True)


class _Batch:
    """The notifications of one transaction of one connection: each key is sent once."""

    def __init__(self):
        self.sent = set()
        self.running = False

    @classmethod
    def current(cls, using: str) -> "_Batch":
        # A connection belongs to one thread. Its batch lasts until its callbacks start running
        # (the transaction committed) and is then replaced; a rolled-back transaction ran none,
        # so the next one may take it over.
        connection = connections[using]
        batch = getattr(connection, "_mcp_notification_batch", None)
        if batch is None or batch.running:
            batch = connection._mcp_notification_batch = cls()
        return batch

    def sender(self, key: str):
        """One change's on_commit callback: a function (Django's log line of a failing callback
        names its ``__qualname__``, which a functools.partial lacks: the line raised AttributeError)."""
        def notify_subscribers():
            self.send(key)
        return notify_subscribers

    def send(self, key: str) -> None:
        self.running = True
        if key in self.sent:
            return
        self.sent.add(key)
        _send(key)


#: The process's notifying loop and its list broadcasts: (pid, loop, _ListChanges). A save
#: outside any event loop (a shell, a Celery task) would otherwise make async_to_sync start a
#: loop, and a Redis connection, per save.
_notifier = (None, None, None)
_notifier_lock = threading.Lock()


def _send(key: str) -> None:
    """notify.resource_updated on the notifying loop, waited for (in order, errors raised
    here); a list_changed is only asked for."""
    loop, list_changes = _notifying()
    if key == LIST_CHANGED:
        loop.call_soon_threadsafe(list_changes.changed)
        return
    asyncio.run_coroutine_threadsafe(notify.resource_updated(key), loop).result(30)


def _notifying():
    global _notifier
    with _notifier_lock:
        pid, loop, list_changes = _notifier
        if pid != os.getpid():  # none yet, or forked (a Celery prefork child): threads do not follow
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="mcp-transport-notify", daemon=True).start()
            list_changes = _ListChanges(loop)
            _notifier = (os.getpid(), loop, list_changes)
        return loop, list_changes


def flush(timeout: float = LIST_CHANGED_EXIT_WAIT) -> bool:
    """Send this process's pending row-driven ``list_changed`` now (its window cut short) and
    wait until it has gone out or failed; False if not within ``timeout`` seconds. Runs when
    the process exits, so that a cron job's last change is told."""
    pid, _, list_changes = _notifier
    return pid != os.getpid() or list_changes.flush(timeout)


class _ListChanges:
    """The process's row-driven ``resources/list_changed``: one broadcast task on the notifying
    loop; ``changed`` (on the loop) only marks it wanted, so any number of changes while one is
    wanted, being sent or in its window cost one more broadcast, which follows the last of them."""

    def __init__(self, loop):
        self.loop = loop
        self.wanted = asyncio.Event()
        self.settled = asyncio.Event()
        self.settled.set()
        self.hurry = asyncio.Event()  # a flush: the current or next window ends at once
        self.in_window = False
        self.running = asyncio.run_coroutine_threadsafe(self._broadcasts(), loop)  # held: a loop holds its tasks weakly

    def changed(self) -> None:
        self.settled.clear()
        self.wanted.set()

    async def _broadcasts(self):
        while True:
            await self.wanted.wait()
            self.wanted.clear()  # before sending: a change from now on is told by the next one
            try:
                await notify.list_changed("resources")
            except Exception:  # Redis away: the next change is told all the same
                logger.exception("notifications/resources/list_changed of a row change failed")
            if not self.wanted.is_set():
                self.settled.set()
            await self._window()

    async def _window(self):
        self.in_window = True
        try:
            await asyncio.wait_for(self.hurry.wait(), LIST_CHANGED_INTERVAL)
        except TimeoutError:
            pass
        finally:
            self.in_window = False
            self.hurry.clear()

    def flush(self, timeout: float) -> bool:
        try:
            asyncio.run_coroutine_threadsafe(self._flushed(), self.loop).result(timeout)
        except concurrent.futures.TimeoutError:
            return False
        return True

    async def _flushed(self):
        if self.in_window or not self.settled.is_set():  # a window is on or follows: it takes the hurry
            self.hurry.set()
        await self.settled.wait()


# Before the thread pools' own exit hook, which refuses new work (hooks run in the reverse order
# of registration): sending it runs a database query in one (channels' database_sync_to_async).
getattr(threading, "_register_atexit", atexit.register)(flush)
