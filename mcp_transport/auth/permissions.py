"""Permissions are live: a change of what a user may do reaches every process's copy of the user.

Each process keeps users with their permissions loaded (users.py: ``load_user``), for
AUTH_CACHE_SECONDS for requests and PERMISSION_CACHE_SECONDS for subscriptions, which ask before
each update they deliver whether their listener may still read the resource. These changes
drop the copies:

- ``m2m_changed`` of a user's ``user_permissions`` or ``groups``, from either side (the users
  named; a reverse ``clear()`` names none, so everyone), and of a group's ``permissions``
  (everyone: a group's members are not looked up);
- ``post_save`` and ``post_delete`` of a user (``is_active``, ``is_superuser``, ``is_staff``:
  what ``get_queryset`` and ``has_perm`` read), except a save of ``last_login`` alone (every
  login makes one); of a ``Group`` or a ``Permission``: everyone.

The process making the change drops the copies at once, and again when its transaction commits,
when it also publishes ``permissions_changed`` on the control channel, so that every web
process drops them (``heard``, connected with the signals). A load that began before either
keeps nothing it read (users.py). A process that hears no control channel (a shell, a Celery
worker checking a 2025-11-25 subscriber as it saves a row) keeps a copy at most
PERMISSION_CACHE_SECONDS for subscriptions; so does a web process whose subscription was down.
"""
import logging

from django.apps import apps
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete, post_save

from ..connections import keys, publish
from ..state import control
from . import users

logger = logging.getLogger(__name__)

#: The control message's kind; its "session id" is a user's id, or EVERYONE.
KIND = "permissions_changed"
EVERYONE = "*"
#: A change naming more users than this drops everyone's copies (one message, not hundreds).
MAX_NAMED = 100
#: Saves of only these fields change nothing a permission check reads.
HARMLESS_FIELDS = frozenset({"last_login"})


def changed(user_ids=None, using=None) -> None:
    """What these users (None: anyone) may do has changed: drop their copies here now and, once
    the transaction commits, in every process."""
    named = None if user_ids is None or len(user_ids) > MAX_NAMED else sorted(str(pk) for pk in user_ids)
    users.forget(named)
    transaction.on_commit(lambda: tell(named), using=using)


def tell(named) -> None:
    """Drop the copies here (a load since the change may have read the rows before the commit)
    and tell every process to. Redis away: logged, and the copies lapse within their time."""
    users.forget(named)
    from ..connections import sync_redis

    try:
        with sync_redis().pipeline(transaction=False) as pipe:
            for name in named if named is not None else [EVERYONE]:
                publish(pipe, keys().control_channel(), control.message(KIND, name))
            pipe.execute()
    except Exception:  # noqa: BLE001 -- a permission change must not fail because Redis is away
        logger.warning("permissions changed, but the other processes could not be told: their copies of the "
                       "users lapse within PERMISSION_CACHE_SECONDS (AUTH_CACHE_SECONDS for requests)",
                       exc_info=True)


def heard(name: str) -> None:
    """A ``permissions_changed`` control message reached this process."""
    users.forget(None if name == EVERYONE else [name])


def _user_saved(sender, instance, update_fields=None, using=None, **kwargs):
    if update_fields is not None and set(update_fields) <= HARMLESS_FIELDS:
        return
    changed([instance.pk], using)


def _user_deleted(sender, instance, using=None, **kwargs):
    changed([instance.pk], using)


def _anyone(sender, using=None, **kwargs):
    changed(None, using)


def _memberships(sender, instance, action, model, pk_set, using=None, **kwargs):
    if action not in ("post_add", "post_remove", "post_clear"):
        return
    user_model = get_user_model()
    if isinstance(instance, user_model):
        changed([instance.pk], using)
    elif model is user_model and pk_set:
        changed(pk_set, using)
    else:  # a group's permissions, or a reverse clear(): whom it touched is not said
        changed(None, using)


def connect_signals() -> None:
    """Connect the receivers above and the control channel's ``permissions_changed``."""
    if not apps.is_installed("django.contrib.auth"):
        return
    from django.contrib.auth.models import Group, Permission

    user_model = get_user_model()
    post_save.connect(_user_saved, sender=user_model, dispatch_uid="mcp_permissions_user_saved")
    post_delete.connect(_user_deleted, sender=user_model, dispatch_uid="mcp_permissions_user_deleted")
    for model in (Group, Permission):
        post_save.connect(_anyone, sender=model, dispatch_uid=f"mcp_permissions_{model.__name__}_saved")
        post_delete.connect(_anyone, sender=model, dispatch_uid=f"mcp_permissions_{model.__name__}_deleted")
    throughs = [Group.permissions.through]
    for name in ("user_permissions", "groups"):
        relation = getattr(user_model, name, None)  # a custom user model may have neither
        if relation is not None and hasattr(relation, "through"):
            throughs.append(relation.through)
    for through in throughs:
        m2m_changed.connect(_memberships, sender=through, dispatch_uid=f"mcp_permissions_{through._meta.label}")
    control.on_message(KIND, heard)
