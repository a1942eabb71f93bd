"""A ModelAdmin as the source of a model's tools: ``register_admin(Book)``.

The tools see what the admin's change list shows a user, through the ModelAdmin's own methods,
called with a request that carries the caller's user: ``get_queryset`` (the rows),
``get_search_results`` (``search_fields``), ``list_filter`` (its field names become ``exact``
filters, ``gte``/``lte`` for dates), ``list_display`` (its model fields are the fields, beside
the primary key and ``display``, the row's ``str()``), ``get_ordering`` (the default order),
``get_form`` (writes) and ``has_view/add/change/delete_permission`` (which tools the caller
sees, and, given the row, whether it may read, change or delete that row).
"""
from django.contrib import admin
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import FieldDoesNotExist, ImproperlyConfigured
from django.db import models

from ..methods.context import Context
from ..methods.registry import make_tool, registry as default_registry
from . import actions
from .base import ModelToolset, _structured
from .requests import request_for

#: The extra field of an admin toolset's rows: ``str(row)``, as the change list's first column.
DISPLAY = "display"


class AdminToolset(ModelToolset):
    """A ModelToolset whose rules are a ModelAdmin's."""

    def __init__(self, model_admin, *, name=None, create=False, update=False, delete=False, resources=False,
                 page_size=None, actions=False, subscribe=False, background=False):
        self.model_admin = model_admin
        self.actions = actions
        self.model = model_admin.model
        self.name, self.create, self.update, self.delete, self.resources = name, create, update, delete, resources
        self.subscribe, self.background = subscribe, background
        self.page_size = page_size or model_admin.list_per_page
        anonymous = request_for(None)
        self.fields = self._display_fields(model_admin.get_list_display(anonymous))
        self.filters = self._list_filters(model_admin.get_list_filter(anonymous))
        self.search_fields = tuple(model_admin.get_search_fields(anonymous))
        self.ordering = self._admin_ordering(model_admin.get_ordering(anonymous))
        super().__init__()

    def _display_fields(self, list_display) -> list:
        return [name for name in list_display if isinstance(name, str) and self._is_field(name)]

    def _list_filters(self, list_filter) -> dict:
        found = {}
        for entry in list_filter:
            path = entry[0] if isinstance(entry, (tuple, list)) else entry
            if not isinstance(path, str):
                continue  # a SimpleListFilter: its choices are its own code, not a field lookup
            field = self._field_at(path)
            found[path] = ["gte", "lte"] if isinstance(field, (models.DateField, models.TimeField)) else ["exact"]
        return found

    def _admin_ordering(self, ordering) -> list:
        sortable = [name for name in self.fields if not self.model._meta.get_field(name).many_to_many]
        first = [entry for entry in ordering or () if entry.lstrip("-") in sortable][:1]
        return first + [name for name in sortable if name != (first[0].lstrip("-") if first else None)]

    def _is_field(self, name) -> bool:
        try:
            self.model._meta.get_field(name)
        except FieldDoesNotExist:
            return False
        return True

    def _field_at(self, path):
        from .schema import field_path

        return field_path(self.model, path)

    # -- the ModelAdmin's answers -----------------------------------------------------------------

    def get_queryset(self, ctx):
        return self.model_admin.get_queryset(request_for(ctx.user))

    def search(self, ctx, queryset, term):
        found, _duplicates = self.model_admin.get_search_results(request_for(ctx.user), queryset, term)
        return found  # ModelToolset.tool_list keeps each row once

    def has_permission(self, user, action) -> bool:
        return getattr(self.model_admin, f"has_{action}_permission")(request_for(user))

    def has_object_permission(self, ctx, action, obj) -> bool:
        if action == "add":
            return True
        return getattr(self.model_admin, f"has_{action}_permission")(request_for(ctx.user), obj)

    def get_form_class(self, ctx, obj=None):
        request = request_for(ctx.user if ctx is not None else None)
        return self.model_admin.get_form(request, obj, change=obj is not None)

    # -- actions (actions.py) ---------------------------------------------------------------------

    def register(self, registry=default_registry):
        super().register(registry)
        if self.actions:
            self._register_actions(registry)
        return self

    def _register_actions(self, registry):
        ids = {"type": "array", "items": self.key_schema(), "minItems": 1, "maxItems": self.page_size,
               "description": f"The {self.pk.name}s of the {self.opts.verbose_name_plural} to act on"}
        output = {"type": "object", "properties": {"action": {"type": "string"}, "count": {"type": "integer"},
                                                   "messages": {"type": "array", "items": {"type": "string"}}},
                  "required": ["action", "count", "messages"]}
        for name, (func, description) in actions.all_actions(self.model_admin).items():
            if name in ("list", "get", "create", "update", "delete", "list_all"):
                raise ImproperlyConfigured(f"{type(self.model_admin).__name__}: the action {name!r} has the "
                                           f"name of a tool of {self.prefix}; rename it.")
            confirm = actions.needs_confirmation(func)
            spec = make_tool(_action_function(self, name), name=f"{self.prefix}_{name}",
                             description=f"{description} (an admin action{', confirmed first' if confirm else ''}).",
                             input_schema={"type": "object", "properties": {"ids": ids}, "required": ["ids"],
                                           "additionalProperties": False},
                             output_schema=output, annotations={"readOnlyHint": False, "destructiveHint": confirm,
                                                                "openWorldHint": False})
            spec.visible = _offered_to(self.model_admin, name)
            spec.database_text = True  # its ids go to the ORM
            registry.tools[spec.name] = spec

    # -- the rows: their fields and their display ---------------------------------------------------

    def row_schema(self) -> dict:
        schema = super().row_schema()
        schema["properties"][DISPLAY] = {"type": "string", "description": "The row as the admin names it"}
        return schema

    def serialize(self, ctx, obj, fields=None) -> dict:
        return {**super().serialize(ctx, obj, fields), DISPLAY: str(obj)}


def _action_function(toolset, name):
    def run(ctx: Context, ids):
        return _structured(actions.run(toolset, name, ctx, ids))
    run.__name__ = name
    return run


def _offered_to(model_admin, name):
    def visible(principal) -> bool:
        return actions.offered(model_admin, name, getattr(principal, "user", None) or AnonymousUser())
    return visible


def register_admin(model, site=None, registry=None, **options) -> AdminToolset:
    """Register the tools of ``model``'s ModelAdmin on ``site`` (default: the admin site);
    ``create``, ``update``, ``delete``, ``resources``, ``subscribe``, ``actions`` and ``background``
    opt in, ``name`` sets the prefix."""
    site = site or admin.site
    if not site.is_registered(model):
        raise ImproperlyConfigured(f"{model.__name__} has no ModelAdmin on {site.name!r}: register it there first.")
    return AdminToolset(site.get_model_admin(model), **options).register(registry or default_registry)
