"""Rows' changes as ``resources/updated``: a toolset with ``subscribe = True`` connects the
model's ``post_save`` and ``post_delete`` here, in every process that loads the project (the web
process, a Celery worker, a management command), and each change reaches the subscribers of
the row's URI through Redis (methods/notify.py: the 2025-11-25 GET streams and the 2026-07-28
``subscriptions/listen`` streams).

The notification leaves after the transaction commits (``transaction.on_commit``): a rolled-back
save tells no one, and a subscriber that reads the row on hearing of it reads the new row. It
names the URI only; who may hear of it was checked when they subscribed (dispatch.require_readable).

One transaction tells each URI once: a row saved ten times in it is one ``resources/updated``,
and rows created or deleted in it are one ``resources/list_changed`` (``resources/list`` lists
the rows). Each change still registers its own ``on_commit`` callback, so a savepoint rolled
back takes its changes' callbacks with it and no change of a committed savepoint is lost; the
callbacks of one transaction share a ``_Batch``, and the first one to run for a URI sends it.
"""
import asyncio
import os
import threading

from django.db import connections, transaction
from django.db.models.signals import post_delete, post_save

from ..methods import notify

#: The batch key of ``notifications/resources/list_changed``, beside the rows' URIs.
LIST_CHANGED = "resources/list_changed"


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


#: The process's notifying loop: (pid, loop). A save outside any event loop (a shell, a Celery
#: task) would otherwise make async_to_sync start a loop, and a Redis connection, per save.
_notifier = (None, None)
_notifier_lock = threading.Lock()


def _send(key: str) -> None:
    """notify.resource_updated (or list_changed) on the notifying loop, waited for (in order,
    errors raised here)."""
    timeout = 30
    coroutine = notify.list_changed("resources") if key == LIST_CHANGED else notify.resource_updated(key)
    asyncio.run_coroutine_threadsafe(coroutine, _notifying_loop()).result(timeout)


def _notifying_loop():
    global _notifier
    with _notifier_lock:
        pid, loop = _notifier
        if pid != os.getpid():  # none yet, or forked (a Celery prefork child): threads do not follow
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="mcp-transport-notify", daemon=True).start()
            _notifier = (os.getpid(), loop)
        return loop
