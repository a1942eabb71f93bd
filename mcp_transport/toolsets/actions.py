"""A ModelAdmin's actions as tools: ``register_admin(Author, actions=True)``.

Each action the admin offers becomes ``<prefix>_<action>``, taking the keys of the rows to act
on (``ids``). A caller sees it when the admin would offer it to them (``get_actions``, which
checks the action's ``allowed_permissions``), and acts only on rows of the admin's
``get_queryset`` for them. An action that needs the delete permission (``delete_selected``
among them), or one marked ``mcp_confirm = True``, first asks the user to confirm through
elicitation: in the 2025-11-25 era on the call's stream, in 2026-07-28 as an
``InputRequiredResult`` (the tool runs again with the answer). The admin's messages
(``message_user``) are the result.
"""
from django.contrib.admin.utils import model_format_dict
from django.contrib.messages.storage.base import BaseStorage
from django.db import transaction
from django.http import HttpResponseBase, QueryDict

from ..methods.registry import ToolError
from .requests import request_for

#: What the confirmation asks for: one boolean.
CONFIRM_SCHEMA = {"type": "object", "properties": {"confirm": {"type": "boolean", "title": "Go ahead"}},
                  "required": ["confirm"]}


class _Collected(BaseStorage):
    """The request's messages, kept for the result instead of a cookie or a session."""

    def _get(self, *args, **kwargs):
        return [], True

    def _store(self, messages, response, *args, **kwargs):
        return []


class _EveryPermission:
    """A user who may do everything: ``get_actions`` with it lists every action there is."""

    is_active = is_staff = is_superuser = is_authenticated = True
    pk = None

    def has_perm(self, perm, obj=None):
        return True

    def has_module_perms(self, app_label):
        return True


def all_actions(model_admin) -> dict:
    """{name: (function, description)} of every action of the ModelAdmin, whoever asks."""
    found = model_admin.get_actions(request_for(_EveryPermission()))
    return {name: (func, _described(description, model_admin)) for name, (func, name, description) in found.items()}


def _described(description, model_admin) -> str:
    """As the admin's action menu shows it: "Delete selected %(verbose_name_plural)s" filled in."""
    try:
        return str(description) % model_format_dict(model_admin.opts)
    except (TypeError, ValueError, KeyError):
        return str(description)


def needs_confirmation(func) -> bool:
    return getattr(func, "mcp_confirm", False) or "delete" in getattr(func, "allowed_permissions", ())


def offered(model_admin, name, user) -> bool:
    """The admin offers this action to ``user`` (it runs on the event loop: permissions only)."""
    return name in model_admin.get_actions(request_for(user))


def run(toolset, name, ctx, ids) -> dict:
    model_admin = toolset.model_admin
    func, description = all_actions(model_admin)[name]
    if needs_confirmation(func):
        _confirm(ctx, description, len(set(ids)), toolset.opts)
    request = request_for(ctx.user)
    request.method, request.POST = "POST", QueryDict("post=yes")  # "the user has already confirmed"
    request._messages = _Collected(request)
    with transaction.atomic():
        queryset = model_admin.get_queryset(request).filter(pk__in=ids)
        if queryset.count() != len(set(ids)):
            raise ToolError(f"Not every {toolset.opts.verbose_name} of ids was found.")
        answer = func(model_admin, request, queryset)
    if isinstance(answer, HttpResponseBase):
        raise ToolError(f"The action {name} answered with a page for a person instead of acting "
                        "(in the admin, rows that others protect do this to delete_selected).")
    return {"action": name, "count": len(set(ids)), "messages": [str(m) for m in request._messages._queued_messages]}


def _confirm(ctx, description, count, opts):
    noun = opts.verbose_name if count == 1 else opts.verbose_name_plural
    answer = ctx.elicit(f"{description}: {count} {noun}. Go ahead?", CONFIRM_SCHEMA, key="confirm")
    if answer.get("action") != "accept" or not (answer.get("content") or {}).get("confirm"):
        raise ToolError("Not confirmed: nothing was done.")
