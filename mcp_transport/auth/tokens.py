"""Static tokens for machine clients (``McpToken``): create, revoke, and keep caches honest.

Revoking (here, in the admin, or by deleting the row) and changing a token take effect on the
next request on every process: the signal receivers below replace the token's cached
validation in Redis with a tombstone (auth.revoked). The same goes for django-oauth-toolkit's
access tokens, which the toolkit revokes by deleting their rows (its revocation endpoint,
refresh-token rotation, the admin). A new token, once committed, is announced (auth.created),
so that no process keeps refusing its value from a lookup before it existed (auth/failures.py).
"""
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.utils import timezone

from ..models import McpToken
from . import changed, revoked, token_digest
from . import created as auth_created


def create(username: str, scope: str, expires_in=None, name: str = ""):
    """A new token for ``username`` (created if needed): (row, the token itself, shown once)."""
    user, _ = get_user_model().objects.get_or_create(**{get_user_model().USERNAME_FIELD: username})
    secret = McpToken.new_secret()
    row = McpToken(user=user, name=name, scope=" ".join(scope.split()),
                   expires_at=timezone.now() + timedelta(seconds=expires_in) if expires_in else None)
    row.set_secret(secret)
    row.save()
    return row, secret


def revoke(secret: str) -> bool:
    """Revoke the token; False when no active token has this value."""
    row = McpToken.objects.filter(digest=token_digest(secret), revoked_at=None).first()
    if row is None:
        return False
    row.revoked_at = timezone.now()
    row.save(update_fields=["revoked_at"])
    return True


def _static_saved(sender, instance, created, **kwargs):
    if instance.revoked_at is not None:
        revoked([instance.digest])
    elif created:
        _announce(instance.digest)
    else:
        changed([instance.digest])  # a new scope or expiry: validate again


def _static_deleted(sender, instance, **kwargs):
    revoked([instance.digest])


def _toolkit_saved(sender, instance, created, **kwargs):
    if created and instance.token_checksum:
        _announce(instance.token_checksum)
    elif instance.token_checksum:
        changed([instance.token_checksum])


def _announce(digest):
    # Once committed: a lookup before the commit would not find the row, and be remembered.
    transaction.on_commit(lambda: auth_created([digest]))


def _toolkit_deleted(sender, instance, **kwargs):
    if instance.token_checksum:
        revoked([instance.token_checksum])


def connect_signals():
    """The receivers that keep the caches honest: tokens' (here) and users' permissions'
    (permissions.py: a permission taken away holds on the next request and the next update)."""
    from django.apps import apps

    from .permissions import connect_signals as connect_permission_signals

    connect_permission_signals()
    post_save.connect(_static_saved, sender=McpToken, dispatch_uid="mcp_token_saved")
    post_delete.connect(_static_deleted, sender=McpToken, dispatch_uid="mcp_token_deleted")
    if apps.is_installed("oauth2_provider"):
        from oauth2_provider.models import get_access_token_model

        model = get_access_token_model()
        post_save.connect(_toolkit_saved, sender=model, dispatch_uid="mcp_toolkit_token_saved")
        post_delete.connect(_toolkit_deleted, sender=model, dispatch_uid="mcp_toolkit_token_deleted")
