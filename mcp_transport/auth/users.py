"""The Django user behind a principal, and the threads that read users and tokens.

``load_user`` gives the user with its permissions loaded (``has_perm`` then costs no query, as
``tools/list`` needs on the event loop) from process memory: at most AUTH_CACHE_SECONDS old for
a request, at most PERMISSION_CACHE_SECONDS old for a subscription that asks, before it
delivers, whether its listener may still read the resource (methods/notify.py: ``may_read``).
Callers that ask for the same user at once share one load. A change of a user's permissions,
groups or flags drops the copies (``forget``, called by permissions.py in the process that made
the change and, through the control channel, in every other one); a load that began before the
change keeps nothing it read.

Token checks and user loads are database reads of a few milliseconds: they run in threads of
their own (``in_auth_thread``, AUTH_THREADS per process), never on Channels' one
thread-sensitive thread, where any slow query of anyone's (a listener's readability check, a
job's row) would make every other caller's token check wait behind it.
"""
import asyncio
import copy
import os
import threading
import time
import weakref
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor

from channels.db import DatabaseSyncToAsync
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.db.models import Model

from ..conf import get_config

#: Threads per process checking tokens and loading users; each may keep a database connection
#: (CONN_MAX_AGE) as Channels' one thread did.
AUTH_THREADS = 4


class _Memory:
    """A bounded map whose entries expire: the oldest go first when it is full."""

    def __init__(self):
        self.entries = OrderedDict()

    def get(self, key, now):
        entry = self.entries.get(key)
        if entry is None:
            return None
        value, until = entry
        if now >= until:
            self.entries.pop(key, None)  # revoked() may have dropped it meanwhile, from another thread
            return None
        return value

    def put(self, key, value, until):
        self.entries.pop(key, None)
        self.entries[key] = (value, until)
        while len(self.entries) > get_config()["AUTH_CACHE_SIZE"]:
            self.entries.popitem(last=False)

    def clear(self):
        self.entries.clear()


_users = _Memory()  # user id -> (the user, its permissions loaded; the Unix time its load began)
#: Bumped by every ``forget``: a load that began before it keeps nothing, and is joined by no one.
_generation = 0
#: The event loop -> {user id: (generation, task)}: the loads in flight there.
_loading = weakref.WeakKeyDictionary()
_executor = (None, None)  # (pid, ThreadPoolExecutor): threads do not follow a fork (Celery's prefork)
_executor_lock = threading.Lock()


def _auth_executor() -> ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        pid, executor = _executor
        if pid != os.getpid():
            executor = ThreadPoolExecutor(AUTH_THREADS, thread_name_prefix="mcp-auth")
            _executor = (os.getpid(), executor)
        return executor


def in_auth_thread(func):
    """``func`` as a coroutine function run in an auth thread, its database connections closed
    before and after when stale (as ``database_sync_to_async`` does), not on the one thread
    Channels' ``database_sync_to_async`` shares with everyone."""
    return DatabaseSyncToAsync(func, thread_sensitive=False, executor=_auth_executor())


async def load_user(user_id, max_age=None):
    """The user, with its permissions loaded, from process memory if it was loaded at most
    ``max_age`` seconds ago (None: within AUTH_CACHE_SECONDS; 0: load it now) and no change of
    permissions was heard since. A copy: a tool may change its user without touching others'."""
    now = time.time()
    entry = _users.get(user_id, now)
    if entry is not None and (max_age is None or now - entry[1] < max_age):
        return _copy_user(entry[0])
    return _copy_user(await _load(user_id))


async def _load(user_id):
    """One load per user in flight on this loop: who asks meanwhile waits for it."""
    loop = asyncio.get_running_loop()
    loading = _loading.setdefault(loop, {})
    found = loading.get(user_id)
    if found is None or found[0] != _generation:
        task = loop.create_task(_fetch_and_keep(user_id, _generation))
        found = loading[user_id] = (_generation, task)
        task.add_done_callback(lambda done: _loaded(loading, user_id, done))
    return await asyncio.shield(found[1])


def _loaded(loading, user_id, task) -> None:
    if loading.get(user_id, (None, None))[1] is task:
        loading.pop(user_id, None)  # ``forget`` may clear it meanwhile, from another thread
    if not task.cancelled():
        task.exception()  # its waiters have it; none left must not make it "never retrieved"


async def _fetch_and_keep(user_id, generation):
    began = time.time()
    user = await in_auth_thread(_fetch_user)(user_id)
    if generation == _generation:  # no permission changed meanwhile: what it read is current
        _users.put(user_id, (user, began), began + get_config()["AUTH_CACHE_SECONDS"])
    return user


def forget(user_ids=None) -> None:
    """Drop this process's copies of these users (None: of every user): their permissions,
    groups or flags changed. Any thread may call it."""
    global _generation
    _generation += 1
    if user_ids is None:
        _users.clear()
    else:
        named = {str(user_id) for user_id in user_ids}
        for key in [key for key in list(_users.entries) if str(key) in named]:
            _users.entries.pop(key, None)
    for loading in list(_loading.values()):
        loading.clear()


def clear() -> None:
    _users.clear()


def _copy_user(user):
    """``copy.copy(user)`` for a model instance without its round through ``__reduce__`` (a
    model class lookup in the app registry: 47 us a request on a busy core, 5 here)."""
    if not isinstance(user, Model):
        return copy.copy(user)
    made = object.__new__(type(user))
    made.__dict__.update(user.__getstate__())
    return made


def _fetch_user(user_id):
    user = get_user_model().objects.filter(pk=user_id).first()
    if user is None or not user.is_active:
        return AnonymousUser()
    user.get_all_permissions()  # fills ModelBackend's _perm_cache
    return user
