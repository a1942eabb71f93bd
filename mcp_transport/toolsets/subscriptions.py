"""Rows' changes as ``resources/updated``: a toolset with ``subscribe = True`` connects the
model's ``post_save`` and ``post_delete`` here, in every process that loads the project (the web
process, a Celery worker, a management command), and each change reaches the subscribers of
the row's URI through Redis (methods/notify.py: the 2025-11-25 GET streams and the 2026-07-28
``subscriptions/listen`` streams).

The notification leaves after the transaction commits (``transaction.on_commit``): a rolled-back
save tells no one, and a subscriber that reads the row on hearing of it reads the new row. It
names the URI only; who may hear of it was checked when they subscribed (dispatch.require_readable).
"""
import asyncio
import functools
import os
import threading

from django.db import transaction
from django.db.models.signals import post_delete, post_save

from ..methods import notify


def notify_changes(model, template: str) -> None:
    """Notify the subscribers of ``template``'s row (``{pk}``) on each save and delete of ``model``."""
    handler = functools.partial(_row_changed, template)
    uid = f"mcp_transport.toolsets.subscriptions:{template}"
    post_save.connect(handler, sender=model, weak=False, dispatch_uid=uid)
    post_delete.connect(handler, sender=model, weak=False, dispatch_uid=uid)


def _row_changed(template, sender, instance, using=None, **kwargs):
    uri = template.replace("{pk}", str(instance.pk))
    # robust: Redis being away must not turn a committed save into an exception in its caller.
    transaction.on_commit(functools.partial(_send, uri), using=using, robust=True)


#: The process's notifying loop: (pid, loop). A save outside any event loop (a shell, a Celery
#: task) would otherwise make async_to_sync start a loop, and a Redis connection, per save.
_notifier = (None, None)
_notifier_lock = threading.Lock()


def _send(uri: str) -> None:
    """notify.resource_updated on the notifying loop, waited for (in order, errors raised here)."""
    timeout = 30
    asyncio.run_coroutine_threadsafe(notify.resource_updated(uri), _notifying_loop()).result(timeout)


def _notifying_loop():
    global _notifier
    with _notifier_lock:
        pid, loop = _notifier
        if pid != os.getpid():  # none yet, or forked (a Celery prefork child): threads do not follow
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="mcp-transport-notify", daemon=True).start()
            _notifier = (os.getpid(), loop)
        return loop
