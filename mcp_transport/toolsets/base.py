"""``ModelToolset``: a model as MCP tools, checked against the caller on every call.

    @register
    class BookTools(ModelToolset):
        model = Book
        fields = ["id", "title", "author", "year"]          # what callers may read, and nothing else
        filters = {"author": ["exact"], "year": ["gte", "lte"]}
        search_fields = ["title", "author__name"]
        ordering = ["title", "-year"]                        # what a list may be sorted by
        create = update = delete = True                       # each opted in

        def get_queryset(self, ctx):                          # the rows this caller may reach
            return super().get_queryset(ctx).filter(owner=ctx.user)

gives ``book_list``, ``book_get``, ``book_create``, ``book_update`` and ``book_delete``. Each
tool needs the caller's Django model permission (``view_``, ``add_``, ``change_``, ``delete_``;
``has_permission`` says otherwise): a tool the caller may not use is absent from its
``tools/list`` and unknown to its ``tools/call`` (auth.may_use, through ``ToolSpec.visible``).
Every row is read through ``get_queryset(ctx)``, so a row outside it is "not found", to
``get``, ``update`` and ``delete`` alike. Writes are validated by a ModelForm and run in a
transaction. ``resources = True`` also serves each row as ``django://<app>.<model>/{pk}``,
and ``subscribe = True`` tells that URI's subscribers of each save and delete (subscriptions.py).
"""
import json

from django.contrib.auth import get_permission_codename
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db import transaction
from django.db.models import ProtectedError, RestrictedError
from django.forms.models import modelform_factory

from ..conf import get_config
from ..methods import content
from ..methods.context import Context
from ..methods.registry import ToolError, make_tool, registry as default_registry
from ..protocol import storable
from ..protocol.errors import InvalidParams, ResourceNotFound
from . import filters as filtering, forms, paging, subscriptions
from .schema import field_schema, model_field, parse_value, value_of

#: Each word of a search is one more condition in the query: a search is short.
SEARCH_MAX_LENGTH = 200


class ModelToolset:
    #: The model the tools serve.
    model = None
    #: Prefix of the tool names (default: the model's name, ``book``).
    name = None
    #: The fields callers may read (``"__all__"``: every concrete and many-to-many field); the
    #: primary key is always one of them. ``get_fields(ctx)`` may narrow them per caller.
    fields = None
    #: ``{"path": ["lookup", ...]}``: the list tool's filter arguments.
    filters = {}
    #: Fields the list tool's ``search`` argument looks in (the admin's syntax: ``^`` ``=`` ``@``).
    search_fields = ()
    #: What the list may be sorted by (each also descending); the first, as written, is the default.
    ordering = ()
    #: Rows per page unless the caller asks for fewer, and at most.
    page_size = 50
    #: Opt-in write tools.
    create = update = delete = False
    #: The ModelForm that validates writes (default: one of ``form_fields``).
    form_class = None
    #: The fields a write may set (default: the editable ``fields`` but the primary key).
    form_fields = None
    #: Serve rows as the resource template ``django://<app_label>.<model_name>/{pk}``.
    resources = False
    #: With ``resources``: a row's save or delete, in any process, notifies the subscribers of
    #: its URI once the transaction commits (``resources/updated``, both eras).
    subscribe = False
    #: ``True``, or a dict of the job's Celery options (``queue``, ``soft_time_limit``, ...):
    #: also register ``<prefix>_list_all``, the list's whole query (the same filters, search and
    #: ordering) run as a background job in a Celery worker, reporting progress per chunk.
    background = False
    #: Rows per chunk of ``list_all`` (one query and one progress notification each), and rows
    #: it returns at most (its result is also kept within MAX_EVENT_BYTES).
    background_chunk = 500
    background_max_rows = 5000

    def __init__(self):
        if self.model is None or self.fields is None:
            raise ImproperlyConfigured(f"{type(self).__name__} needs a model and its fields (an allow-list).")
        self.opts = self.model._meta
        self.prefix = self.name or self.opts.model_name
        self.pk = self.opts.pk
        self.readable = self._readable_fields()
        self.filter_arguments = filtering.declared(self.model, self.filters)
        self.orderings = self._orderings()

    # -- what a project overrides --------------------------------------------------------------

    def get_queryset(self, ctx):
        """The rows ``ctx.user`` may reach; every tool reads through it."""
        return self.model._default_manager.all()

    def get_fields(self, ctx) -> list:
        """The names of the fields ``ctx.user`` may read: some of ``fields``."""
        return list(self.readable)

    def has_permission(self, user, action: str) -> bool:
        """Whether ``user`` may use the ``action`` tools (view, add, change, delete). It decides
        what ``tools/list`` shows, on the event loop: it must not query the database (the
        permissions of the request's user are loaded with it)."""
        return user.has_perm(f"{self.opts.app_label}.{get_permission_codename(action, self.opts)}")

    def has_object_permission(self, ctx, action: str, obj) -> bool:
        """Whether ``ctx.user`` may ``action`` this row (in a worker thread: it may query)."""
        return True

    def get_form_class(self, ctx, obj=None):
        return self.form_class or modelform_factory(self.model, fields=self._form_fields())

    def search(self, ctx, queryset, term: str):
        return filtering.search(queryset, self.search_fields, term)

    def save(self, ctx, form, created: bool):
        """Save a valid form (inside the tool's transaction); set owners and the like here."""
        return form.save()

    # -- fields ---------------------------------------------------------------------------------

    def _readable_fields(self) -> dict:
        if self.fields == "__all__":
            chosen = [f for f in self.opts.get_fields() if f.concrete or f.many_to_many]
        else:
            chosen = [model_field(self.model, name) for name in self.fields]
        reverse = [field.name for field in chosen if field.auto_created and not field.concrete]
        if reverse and self.fields != "__all__":
            raise ImproperlyConfigured(f"{self.model.__name__}: {', '.join(reverse)} is a reverse relation, "
                                       "not a field of its own; leave it out of fields.")
        readable = {self.pk.name: self.pk}
        readable.update((field.name, field) for field in chosen if field.name not in reverse)
        return readable

    def _form_fields(self) -> list:
        if self.form_fields is not None:
            return list(self.form_fields)
        return [name for name, field in self.readable.items() if field.editable and not field.primary_key
                and not field.auto_created]

    def _orderings(self) -> list:
        names = [entry.lstrip("-") for entry in self.ordering] or [self.pk.name]
        for name in names:
            if model_field(self.model, name).many_to_many:
                raise ImproperlyConfigured(f"{self.model.__name__}.{name}: a list cannot be ordered by it.")
        allowed = [value for name in names for value in (name, f"-{name}")]
        default = self.ordering[0] if self.ordering else self.pk.name
        return [default, *[value for value in allowed if value != default]]

    def visible_fields(self, ctx) -> dict:
        names = set(self.get_fields(ctx)) | {self.pk.name}
        return {name: field for name, field in self.readable.items() if name in names}

    def serialize(self, ctx, obj, fields=None) -> dict:
        fields = fields if fields is not None else self.visible_fields(ctx)
        return {name: value_of(obj, field) for name, field in fields.items()}

    # -- schemas ----------------------------------------------------------------------------------

    def row_schema(self) -> dict:
        properties = {name: field_schema(field) for name, field in self.readable.items()}
        return {"type": "object", "properties": properties, "required": [self.pk.name]}

    def key_schema(self) -> dict:
        schema = field_schema(self.pk)
        schema["description"] = f"The {self.opts.verbose_name}'s {self.pk.name}"
        return schema

    def list_input_schema(self, paged=True) -> dict:
        properties = {}
        if self.search_fields:
            properties["search"] = {"type": "string", "maxLength": SEARCH_MAX_LENGTH,
                                    "description": "Words to look for (every word must match)"}
        for name, (path, lookup, field) in self.filter_arguments.items():
            properties[name] = filtering.argument_schema(path, lookup, field)
        properties["ordering"] = {"type": "string", "enum": self.orderings, "default": self.orderings[0],
                                  "description": "Sort by this field (a leading - sorts descending)"}
        if paged:
            properties["cursor"] = {"type": "string", "description": "The nextCursor of the previous page"}
            properties["limit"] = {"type": "integer", "minimum": 1, "maximum": self.page_size,
                                   "default": self.page_size, "description": "Rows per page"}
        return _object(properties)

    def write_input_schema(self, partial: bool) -> dict:
        properties, required = forms.input_properties(self.model, self.get_form_class(None), partial=partial)
        if partial:
            properties = {self.pk.name: self.key_schema(), **properties}
            required = [self.pk.name]
        return _object(properties, required)

    # -- the tools ------------------------------------------------------------------------------

    def hidden_fields(self, ctx) -> set:
        """The fields ``get_fields(ctx)`` hides from this caller: it may not filter, search or
        sort by them either (the order of the rows, or which rows match, would show them)."""
        return set(self.readable) - set(self.visible_fields(ctx))

    def _refuse_hidden(self, ctx, arguments):
        hidden = self.hidden_fields(ctx)
        used = [name for name, (path, _, _) in self.filter_arguments.items()
                if name in arguments and path.split("__")[0] in hidden]
        if (arguments.get("ordering") or self.orderings[0]).lstrip("-") in hidden:
            used.append("ordering")
        if arguments.get("search") and any(name.lstrip("^=@").split("__")[0] in hidden for name in self.search_fields):
            used.append("search")
        if used:
            raise ToolError(f"Not available to this caller: {', '.join(used)}.")

    def tool_list(self, ctx, arguments: dict) -> dict:
        narrowed = self._narrowed(ctx, arguments)
        ordering = arguments.get("ordering") or self.orderings[0]
        rows, next_cursor = self._page(narrowed, ordering, arguments.get("limit") or self.page_size,
                                       arguments.get("cursor"), arguments)
        fields = self.visible_fields(ctx)
        page = {"items": [self.serialize(ctx, row, fields) for row in self._prefetched(rows, fields)]}
        if next_cursor:
            page["nextCursor"] = next_cursor
        return page

    def tool_list_all(self, ctx, arguments: dict) -> dict:
        """The whole list in chunks, in a worker: progress after each chunk, stopped at
        ``background_max_rows`` or when the result would pass MAX_EVENT_BYTES (``truncated``)."""
        if not self.has_permission(ctx.user, "view"):  # it may have been taken away since the call
            raise ToolError(f"Not allowed: viewing {self.opts.verbose_name_plural}.")
        narrowed = self._narrowed(ctx, arguments)
        ordering = arguments.get("ordering") or self.orderings[0]
        total = min(narrowed.count(), self.background_max_rows)
        fields, items, cursor, budget = self.visible_fields(ctx), [], None, _result_budget()
        while True:
            ctx.check_cancelled()
            size = min(self.background_chunk, self.background_max_rows - len(items))
            rows, cursor = self._page(narrowed, ordering, size, cursor, arguments)
            for row in self._prefetched(rows, fields):
                item = self.serialize(ctx, row, fields)
                budget -= len(json.dumps(item, ensure_ascii=False).encode()) + 1
                if budget < 0:
                    return {"items": items, "count": len(items), "truncated": True}
                items.append(item)
            if rows:
                total = max(total, len(items))  # rows added since the count
                ctx.report_progress(len(items), total, f"{len(items)} of {total} {self.opts.verbose_name_plural}")
            truncated = cursor is not None and len(items) >= self.background_max_rows
            if cursor is None or truncated:
                return {"items": items, "count": len(items), "truncated": truncated}

    def _narrowed(self, ctx, arguments):
        """The caller's rows that the arguments' search and filters keep."""
        self._refuse_hidden(ctx, arguments)
        queryset = self.get_queryset(ctx)
        narrowed = queryset
        if arguments.get("search") and self.search_fields:
            narrowed = self.search(ctx, narrowed, _bounded_search(arguments["search"]))
        try:
            narrowed = filtering.apply(narrowed, self.filter_arguments, arguments)
        except ValidationError as exc:
            raise ToolError(f"Invalid filter: {' '.join(exc.messages)}") from None
        if narrowed is not queryset:  # a search or filter across relations may repeat rows
            narrowed = queryset.filter(pk__in=narrowed.values("pk"))
        return narrowed

    def _page(self, narrowed, ordering, size, cursor, arguments):
        try:
            return paging.page(
                narrowed, field=model_field(self.model, ordering.lstrip("-")), descending=ordering.startswith("-"),
                size=size, cursor=cursor, salt=f"mcp_transport.toolsets:{self.prefix}_list",
                digest=paging.query_digest(arguments))
        except (paging.CursorError, ValidationError) as exc:
            raise ToolError(str(exc) if isinstance(exc, paging.CursorError) else "The cursor is not valid.") from None

    def _prefetched(self, rows, fields):
        many = [name for name, field in fields.items() if field.many_to_many]
        if many and rows:
            from django.db.models import prefetch_related_objects

            prefetch_related_objects(rows, *many)
        return rows

    def tool_get(self, ctx, arguments: dict) -> dict:
        return self.serialize(ctx, self.find(ctx, arguments[self.pk.name], "view"))

    def tool_create(self, ctx, arguments: dict) -> dict:
        form_class = self.get_form_class(ctx)
        with transaction.atomic():
            form = form_class(data=forms.create_data(self.model, form_class, arguments))
            obj = self._saved(ctx, form, created=True)
        return self.serialize(ctx, obj)

    def tool_update(self, ctx, arguments: dict) -> dict:
        changes = {k: v for k, v in arguments.items() if k != self.pk.name}
        with transaction.atomic():
            obj = self.find(ctx, arguments[self.pk.name], "change", lock=True)
            form_class = self.get_form_class(ctx, obj)
            form = form_class(data=forms.update_data(obj, form_class, changes), instance=obj)
            obj = self._saved(ctx, form, created=False)
        return self.serialize(ctx, obj)

    def tool_delete(self, ctx, arguments: dict) -> dict:
        key = arguments[self.pk.name]
        with transaction.atomic():
            obj = self.find(ctx, key, "delete", lock=True)
            try:
                obj.delete()
            except (ProtectedError, RestrictedError) as exc:
                raise ToolError(f"This {self.opts.verbose_name} cannot be deleted: {exc.args[0]}") from None
        return {"deleted": key}

    def _saved(self, ctx, form, created):
        if not form.is_valid():
            raise ToolError(f"Invalid {self.opts.verbose_name}: {forms.errors_text(form)}")
        return self.save(ctx, form, created)

    def find(self, ctx, key, action, lock=False):
        """The row ``key`` of the caller's queryset that it may ``action``, or ToolError "not
        found" (a row it may not reach is one that does not exist)."""
        missing = ToolError(f"No {self.opts.verbose_name} with {self.pk.name} {key!r}.")
        if storable.unstorable(key, "key") is not None:  # a resource URI's: no stored key holds it
            raise missing
        try:
            key = parse_value(self.pk, key)
        except ValidationError:
            raise missing from None
        obj = self.get_queryset(ctx).filter(pk=key).first()
        if obj is not None and lock:  # locked apart: the caller's queryset may not allow FOR UPDATE
            obj = self.model._default_manager.select_for_update().filter(pk=key).first()
        if obj is None or not self.has_object_permission(ctx, action, obj):
            raise missing
        return obj

    def read_resource(self, ctx, uri: str, key: str, serialize=True):
        """The row as JSON; ``serialize=False`` only checks that the caller may read it (the
        subscriptions' check: ResourceSpec.readable)."""
        try:
            obj = self.find(ctx, key, "view")
        except ToolError:
            raise ResourceNotFound(f"Resource not found: {uri}.", data={"uri": uri}) from None
        return json.dumps(self.serialize(ctx, obj), ensure_ascii=False) if serialize else None

    # -- registration ----------------------------------------------------------------------------

    def tools(self) -> list:
        """(action, tool name, method, input schema, output schema, annotations) of each tool."""
        row = self.row_schema()
        key = _object({self.pk.name: self.key_schema()}, [self.pk.name])
        page = _object({"items": {"type": "array", "items": row}, "nextCursor": {"type": "string"}}, ["items"],
                       closed=False)
        read = {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False}
        found = [("view", "list", self.tool_list, self.list_input_schema(), page, read),
                 ("view", "get", self.tool_get, key, row, read)]
        if self.background:
            whole = _object({"items": {"type": "array", "items": row}, "count": {"type": "integer"},
                             "truncated": {"type": "boolean",
                                           "description": "More rows matched than one result holds"}},
                            ["items", "count", "truncated"], closed=False)
            found.append(("view", "list_all", self.tool_list_all, self.list_input_schema(paged=False), whole, read))
        writes = {"create": ("add", self.tool_create, False, {"destructiveHint": False}),
                  "update": ("change", self.tool_update, True, {"destructiveHint": True, "idempotentHint": True}),
                  "delete": ("delete", self.tool_delete, None, {"destructiveHint": True, "idempotentHint": True})}
        for verb, (action, method, partial, hints) in writes.items():
            if getattr(self, verb):
                schema = key if partial is None else self.write_input_schema(partial)
                output = _object({"deleted": self.key_schema()}, ["deleted"]) if partial is None else row
                found.append((action, verb, method, schema, output, {"readOnlyHint": False, "openWorldHint": False,
                                                                     **hints}))
        return found

    def describe(self, verb: str) -> str:
        plural = self.opts.verbose_name_plural
        return {"list": f"List {plural}: filter, search, sort; pages follow nextCursor.",
                "get": f"One {self.opts.verbose_name} by its {self.pk.name}.",
                "list_all": f"Every matching {self.opts.verbose_name} (up to {self.background_max_rows}), as a "
                            "background job reporting its progress: for queries too large for list's pages.",
                "create": f"Create one {self.opts.verbose_name}.",
                "update": f"Change one {self.opts.verbose_name}: only the fields given change.",
                "delete": f"Delete one {self.opts.verbose_name}."}[verb]

    def visible_to(self, action):
        def visible(principal) -> bool:
            return bool(self.has_permission(getattr(principal, "user", None) or AnonymousUser(), action))
        return visible

    def register(self, registry=default_registry):
        for action, verb, method, input_schema, output_schema, annotations in self.tools():
            spec = make_tool(_tool_function(method), name=f"{self.prefix}_{verb}", description=self.describe(verb),
                             input_schema=input_schema, output_schema=output_schema, annotations=annotations,
                             background=self.background if verb == "list_all" else False)
            spec.visible = self.visible_to(action)
            spec.database_text = True  # what it is given goes to the ORM (protocol/storable.py)
            registry.tools[spec.name] = spec
        if self.subscribe and not self.resources:
            raise ImproperlyConfigured(f"{type(self).__name__}: subscribe = True needs resources = True.")
        if self.resources:
            self._register_resources(registry)
        return self

    def _register_resources(self, registry):
        uri = f"django://{self.opts.app_label}.{self.opts.model_name}/{{pk}}"

        def read(ctx: Context, pk: str) -> str:
            return self.read_resource(ctx, uri.replace("{pk}", pk), pk)
        registry.resource(uri, name=f"{self.prefix}", mime_type="application/json",
                          description=f"One {self.opts.verbose_name}, as JSON.")(read)
        registry.templates[uri].visible = self.visible_to("view")
        registry.templates[uri].lister = lambda ctx, cursor, size: self.list_resources(ctx, uri, cursor, size)
        registry.templates[uri].readable = lambda ctx, pk: self.read_resource(ctx, uri.replace("{pk}", pk), pk,
                                                                              serialize=False)
        if self.subscribe:
            subscriptions.notify_changes(self.model, uri)

    def list_resources(self, ctx, template: str, cursor, size: int):
        """A page of ``resources/list``: the caller's rows by primary key (ResourceSpec.lister)."""
        try:
            rows, after = paging.page(self.get_queryset(ctx), field=self.pk, descending=False, size=size,
                                      cursor=cursor, salt=f"mcp_transport.toolsets:{template}", digest="rows")
        except (paging.CursorError, ValidationError):
            raise InvalidParams("The cursor is not one this server issued.") from None
        return [self.resource_entry(ctx, template, row) for row in rows], after

    def resource_entry(self, ctx, template: str, obj) -> dict:
        """A row's entry in ``resources/list``; its name says only its key (``str(obj)`` may
        show a field the caller may not read)."""
        return {"uri": template.replace("{pk}", str(obj.pk)), "name": f"{self.opts.model_name} {obj.pk}",
                "mimeType": "application/json"}


def _result_budget() -> int:
    """Bytes of rows one result may hold: it is one stored event (MAX_EVENT_BYTES), and carries
    the rows twice (structuredContent, and the same JSON as text)."""
    return get_config()["MAX_EVENT_BYTES"] // 2 - 4096


def _tool_function(method):
    """The function the registry calls: the Context and the validated arguments, to ``method``."""
    def run(ctx: Context, **arguments):
        return _structured(method(ctx, arguments))
    run.__name__ = method.__name__
    return run


def _structured(data: dict):
    # "a tool that returns structured content SHOULD also return the serialized JSON in a
    # TextContent block" -- spec 2025-11-25 server/tools
    return content.ToolResult(content=[content.text(json.dumps(data, ensure_ascii=False))], structured_content=data)


def _object(properties, required=(), closed=True) -> dict:
    schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    if closed:
        schema["additionalProperties"] = False
    return schema


def register(toolset, registry=default_registry):
    """Register a ModelToolset class (usable as a class decorator) or instance; returns it."""
    instance = toolset() if isinstance(toolset, type) else toolset
    instance.register(registry)
    return toolset


def _bounded_search(term: str) -> str:
    """The search, refused (a tool error saying why) before a query is built when it has more
    words than SEARCH_MAX_TERMS."""
    try:
        filtering.search_words(term)
    except ValidationError as exc:
        raise ToolError(" ".join(exc.messages)) from None
    return term
