"""A Django REST Framework viewset as MCP tools: ``register_viewset(BookViewSet)``.

Each call runs the viewset itself, as its router would for an HTTP request of the caller: a
request authenticated as ``ctx.user`` goes through the view's ``dispatch``, so its permission
classes (``has_permission``, ``has_object_permission``), throttles, ``get_queryset``, filter
backends, pagination and serializer decide, and nothing here repeats them. The tools are

    <prefix>_list    list      the filter backends' parameters (search, ordering, django-filter's), cursor
    <prefix>_get     retrieve  the lookup (``pk``)
    <prefix>_create  create    the serializer's writable fields
    <prefix>_update  partial_update (or update)  the lookup and the fields to change
    <prefix>_delete  destroy   the lookup
    <prefix>_<name>  an @action: the lookup for a detail action, and the writable fields of
                     the serializer_class it declares, if it declares one

each only when the viewset has that action. A tool whose permission classes refuse the caller
without looking at a row is absent from its ``tools/list``. The schemas come from the serializer
(DRF's own OpenAPI mapping). This module imports DRF: ``mcp_transport.toolsets`` imports it only
when ``register_viewset`` is called, so the app runs without DRF installed.
"""
import io
import json
import logging
from urllib.parse import parse_qsl, urlencode, urlsplit

from django.contrib.auth.models import AnonymousUser
from django.core import signing
from django.core.exceptions import ImproperlyConfigured, SynchronousOnlyOperation, ValidationError
from django.core.handlers.wsgi import WSGIRequest
from django.db import transaction
from rest_framework import exceptions, filters as drf_filters
from rest_framework.request import Request
from rest_framework.schemas.openapi import AutoSchema
from rest_framework.utils.encoders import JSONEncoder

from ..methods.context import Context
from ..methods.registry import ToolError, make_tool, registry as default_registry
from . import paging
from .base import _object, _structured
from .filters import bound_search_terms
from .schema import field_schema, model_field

logger = logging.getLogger(__name__)

#: The standard actions: (tool verb, viewset action, HTTP method, detail).
STANDARD = (("list", "list", "get", False), ("get", "retrieve", "get", True), ("create", "create", "post", False),
            ("update", "partial_update", "patch", True), ("update", "update", "put", True),
            ("delete", "destroy", "delete", True))
#: A query parameter's value may be sent as JSON of any of these types (it becomes query text).
_QUERY_VALUE = ["string", "number", "boolean"]


class _ToolRequest(WSGIRequest):
    """The HTTP request of a tool call: built here, never from the network. Its host is a
    placeholder (the pagination's links are read for their query only), so ALLOWED_HOSTS,
    which guards against forged Host headers, has nothing to check."""

    def get_host(self):
        return "mcp.invalid"


def http_request(user, method: str, query: dict = None, body=None) -> WSGIRequest:
    data = json.dumps(body).encode() if body is not None else b""
    request = _ToolRequest({
        "REQUEST_METHOD": method.upper(), "PATH_INFO": "/", "SCRIPT_NAME": "", "QUERY_STRING": urlencode(query or {}),
        "SERVER_NAME": "mcp.invalid", "SERVER_PORT": "80", "REMOTE_ADDR": "127.0.0.1", "wsgi.url_scheme": "http",
        "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(data)), "wsgi.input": io.BytesIO(data)})
    user = user or AnonymousUser()
    request.user = user
    request._force_auth_user = user  # DRF's Request authenticates it and no one else (rest_framework.test does so)
    return request


class ViewSetToolset:
    """The tools of one viewset. ``actions`` limits them to some of the viewset's action names."""

    def __init__(self, viewset, *, name=None, actions=None, serializer_class=None, model=None):
        self.viewset = viewset
        queryset = getattr(viewset, "queryset", None)
        self.model = model or getattr(queryset, "model", None)
        if self.model is None:
            raise ImproperlyConfigured(f"{viewset.__name__}: set its queryset, or pass model=.")
        self.opts = self.model._meta
        self.prefix = name or self.opts.model_name
        self.serializer_class = serializer_class or getattr(viewset, "serializer_class", None)
        if self.serializer_class is None:
            raise ImproperlyConfigured(f"{viewset.__name__}: set its serializer_class, or pass serializer_class= "
                                       "(the tools' schemas come from it).")
        self.lookup = viewset.lookup_url_kwarg or viewset.lookup_field
        self.only = set(actions) if actions is not None else None

    # -- which tools -----------------------------------------------------------------------------

    def routes(self) -> list:
        """(tool verb, action name, HTTP method, detail, initkwargs) of each tool, as a router's."""
        found, verbs = [], set()
        for verb, action, method, detail in STANDARD:
            if hasattr(self.viewset, action) and verb not in verbs and self._wanted(action):
                verbs.add(verb)
                found.append((verb, action, method, detail, {}))
        for extra in self.viewset.get_extra_actions():
            if self._wanted(extra.__name__):
                if extra.__name__ in {verb for verb, *_ in STANDARD}:
                    raise ImproperlyConfigured(f"{self.viewset.__name__}.{extra.__name__}: the name of a tool of "
                                               f"{self.prefix}; rename the action or leave it out of actions.")
                method = next(m for m in ("get", "post", "put", "patch", "delete") if m in extra.mapping)
                found.append((extra.__name__, extra.mapping[method], method, extra.detail, dict(extra.kwargs)))
        return found

    def _wanted(self, action) -> bool:
        return self.only is None or action in self.only

    def view(self, action, method, detail, initkwargs):
        """A view instance as ``as_view`` makes it for one request (the router's initkwargs)."""
        view = self.viewset(**{"basename": self.prefix, "detail": detail, **initkwargs})
        view.action_map = {method: action}
        view.args, view.kwargs, view.format_kwarg, view.headers = (), {}, None, {}
        return view

    # -- schemas ---------------------------------------------------------------------------------

    def serializer(self, initkwargs, partial=False):
        serializer_class = initkwargs.get("serializer_class") or self.serializer_class
        return serializer_class(context={"request": None, "view": None, "format": None}, partial=partial)

    def row_schema(self, initkwargs=None) -> dict:
        schema = _json_schema(AutoSchema().map_serializer(self.serializer(initkwargs or {})))
        schema["properties"] = {k: v for k, v in schema["properties"].items() if not v.get("writeOnly")}
        schema.pop("required", None)  # a serializer's get_fields may leave a field out for a caller
        return schema

    def body_schema(self, initkwargs, partial) -> tuple:
        schema = _json_schema(AutoSchema().map_serializer(self.serializer(initkwargs, partial=partial)))
        properties = {k: v for k, v in schema["properties"].items() if not v.get("readOnly")}
        required = [name for name in schema.get("required", ()) if name in properties]
        return properties, required

    def key_schema(self) -> dict:
        try:
            schema = field_schema(model_field(self.model, self.viewset.lookup_field))
        except ImproperlyConfigured:
            schema = {"type": "string"}
        return {**schema, "description": f"The {self.opts.verbose_name}'s {self.viewset.lookup_field}"}

    def _bound_search(self, request) -> None:
        """Refuses a search of more terms than SEARCH_MAX_TERMS before the viewset runs a query:
        each term is one more condition over every search field (100 of them: 10 s of PostgreSQL
        on 300,000 books). They are counted by each SearchFilter backend's own
        ``get_search_terms``, the parser its ``filter_queryset`` runs, so the count is the
        query's (DRF's splits on whitespace and commas, keeps quoted phrases whole and repeats)."""
        query = Request(request)
        for backend in getattr(self.viewset, "filter_backends", ()):
            if not issubclass(backend, drf_filters.SearchFilter):
                continue
            try:
                terms = backend().get_search_terms(query)
            except exceptions.ValidationError:
                continue  # the viewset refuses this search itself (400), before any query
            try:
                bound_search_terms(len(terms))
            except ValidationError as exc:
                raise ToolError(" ".join(exc.messages)) from None

    def list_input_schema(self) -> dict:
        view = self.view("list", "get", False, {})
        properties = {}
        for backend in view.filter_backends:
            properties.update(_backend_parameters(backend(), view, self.model))
        properties["cursor"] = {"type": "string", "description": "The nextCursor of the previous page"}
        return _object(properties)

    def input_schema(self, verb, method, detail, initkwargs) -> dict:
        if verb == "list":
            return self.list_input_schema()
        properties, required = {}, []
        standard = verb in ("create", "update")
        if method not in ("get", "delete") and (standard or "serializer_class" in initkwargs):
            properties, required = self.body_schema(initkwargs, partial=method == "patch")
        if detail:
            properties = {self.lookup: self.key_schema(), **properties}
            required = [self.lookup, *required]
        return _object(properties, required)

    def output_schema(self, verb, action, initkwargs) -> dict:
        row = self.row_schema(initkwargs)
        if verb == "list":
            return _object({"items": {"type": "array", "items": row}, "nextCursor": {"type": "string"},
                            "count": {"type": "integer"}}, ["items"], closed=False)
        if verb == "delete":
            return _object({"deleted": self.key_schema()}, ["deleted"])
        if verb in ("get", "create", "update"):
            return row
        return None  # an @action answers what it likes: structured when it is an object

    # -- a call ----------------------------------------------------------------------------------

    def call(self, ctx, verb, action, method, detail, initkwargs, arguments: dict):
        arguments = dict(arguments)
        key = arguments.pop(self.lookup, None)
        query = self._list_query(arguments) if verb == "list" else {}
        body = None if method in ("get", "delete") else arguments
        request = http_request(ctx.user, method, query, body)
        if verb == "list":
            self._bound_search(request)
        view = self.viewset.as_view({method: action}, **{"basename": self.prefix, "detail": detail, **initkwargs})
        kwargs = {self.lookup: str(key)} if detail else {}
        if method == "get":
            response = view(request, **kwargs)
        else:
            with transaction.atomic():  # each write in a transaction, refused ones rolled back
                response = view(request, **kwargs)
                if response.status_code >= 400:
                    transaction.set_rollback(True)
        return self._result(verb, detail, key, arguments, response)

    def _list_query(self, arguments) -> dict:
        cursor = arguments.pop("cursor", None)
        query = {name: _query_text(value) for name, value in arguments.items()}
        if cursor is None:
            return query
        try:
            issued_for, query = signing.loads(cursor, salt=f"mcp_transport.toolsets.drf:{self.prefix}_list")
        except (signing.BadSignature, TypeError, ValueError):
            raise ToolError("The cursor is not one this tool issued.") from None
        if issued_for != paging.query_digest(arguments):
            raise ToolError("The cursor belongs to a query with other arguments: send the same ones, or no cursor.")
        return query

    def _result(self, verb, detail, key, arguments, response):
        if not hasattr(response, "data"):
            raise ToolError(f"{self.viewset.__name__} answered with a page for a person ({response.status_code}), "
                            "not data.")
        status = response.status_code
        data = json.loads(json.dumps(response.data, cls=JSONEncoder)) if response.data is not None else None
        if status >= 400:
            raise ToolError(self._error_text(status, detail, key, data))
        if verb == "list":
            return self._page(data, arguments)
        if verb == "delete":
            return {"deleted": key}
        if isinstance(data, list):
            return {"items": data}
        return data if isinstance(data, dict) else {"result": data}

    def _page(self, data, arguments) -> dict:
        if isinstance(data, list):
            return {"items": data}
        if not isinstance(data, dict) or not isinstance(data.get("results"), list):
            raise ToolError(f"{self.viewset.__name__}'s list answered in a shape other than a list or a page "
                            "with results.")
        page = {"items": data["results"]}
        if isinstance(data.get("count"), int):
            page["count"] = data["count"]
        if data.get("next"):
            query = dict(parse_qsl(urlsplit(data["next"]).query, keep_blank_values=True))
            page["nextCursor"] = signing.dumps([paging.query_digest(arguments), query], compress=True,
                                               salt=f"mcp_transport.toolsets.drf:{self.prefix}_list")
        return page

    def _error_text(self, status, detail, key, data) -> str:
        said = _detail(data)
        if status in (401, 403, 404) and detail:
            # A row the caller may not reach is one that does not exist, as ModelToolset.find says.
            return f"No {self.opts.verbose_name} with {self.lookup} {key!r}."
        if status in (401, 403):
            return f"Not allowed: {said}"
        if status == 429:
            return f"Throttled: {said}"
        if status == 400:
            return f"Invalid {self.opts.verbose_name}: {said}"
        return said

    # -- who sees a tool -------------------------------------------------------------------------

    def visible_to(self, action, method, detail, initkwargs):
        """The view's permission classes' ``has_permission`` for the principal's user (no row:
        ``has_object_permission`` is asked at the call). It runs on the event loop: a permission
        class that queries the database cannot be asked there, and the call decides instead."""
        def visible(principal) -> bool:
            user = getattr(principal, "user", None) or AnonymousUser()
            view = self.view(action, method, detail, initkwargs)
            request = view.initialize_request(http_request(user, method))
            view.request = request
            try:
                view.check_permissions(request)
            except (exceptions.PermissionDenied, exceptions.NotAuthenticated):
                return False
            except SynchronousOnlyOperation:
                return True
            except Exception:  # noqa: BLE001 -- one viewset's bug must not fail the whole tools/list
                logger.exception("%s: its permission classes failed for %s; the tool is hidden",
                                 self.viewset.__name__, action)
                return False
            return True
        return visible

    # -- registration ------------------------------------------------------------------------------

    def register(self, registry=default_registry):
        for verb, action, method, detail, initkwargs in self.routes():
            name = f"{self.prefix}_{verb}"
            read = method == "get"
            annotations = {"readOnlyHint": read, "openWorldHint": False}
            if not read:
                annotations["destructiveHint"] = method in ("put", "patch", "delete")
            spec = make_tool(_tool_function(self, verb, action, method, detail, initkwargs), name=name,
                             description=self.describe(verb, action, initkwargs),
                             input_schema=self.input_schema(verb, method, detail, initkwargs),
                             output_schema=self.output_schema(verb, action, initkwargs), annotations=annotations)
            spec.visible = self.visible_to(action, method, detail, initkwargs)
            spec.database_text = True  # its arguments become the view's query and data
            registry.tools[name] = spec
        return self

    def describe(self, verb, action, initkwargs) -> str:
        plural = self.opts.verbose_name_plural
        said = {"list": f"List {plural}: filter, search, sort; pages follow nextCursor.",
                "get": f"One {self.opts.verbose_name} by its {self.lookup}.",
                "create": f"Create one {self.opts.verbose_name}.",
                "update": f"Change one {self.opts.verbose_name}: only the fields given change." if action ==
                          "partial_update" else f"Replace one {self.opts.verbose_name}'s fields.",
                "delete": f"Delete one {self.opts.verbose_name}."}
        if verb in said:
            return said[verb]
        doc = initkwargs.get("description") or getattr(self.viewset, action).__doc__ or action.replace("_", " ")
        return " ".join(str(doc).split())


def _tool_function(toolset, verb, action, method, detail, initkwargs):
    def run(ctx: Context, **arguments):
        return _structured(toolset.call(ctx, verb, action, method, detail, initkwargs, arguments))
    run.__name__ = f"{toolset.prefix}_{verb}"
    return run


# -- schemas: DRF's OpenAPI 3.0 as JSON Schema 2020-12, and the filter backends' parameters ----------

def _json_schema(schema):
    """OpenAPI's ``nullable`` as a ``null`` type; no ``pattern`` (DRF writes Python's ``\\z``,
    which JSON Schema's ECMA 262 regexes do not read; the serializer checks it anyway)."""
    if isinstance(schema, list):
        return [_json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    schema = {key: _json_schema(value) for key, value in schema.items() if key != "pattern"}
    if schema.pop("nullable", False) and isinstance(schema.get("type"), str):
        schema["type"] = [schema["type"], "null"]
        if "enum" in schema:
            schema["enum"] = [*schema["enum"], None]
    return schema


def _backend_parameters(backend, view, model) -> dict:
    if isinstance(backend, drf_filters.SearchFilter):
        if not getattr(view, "search_fields", None):
            return {}
        return {backend.search_param: {"type": "string", "maxLength": 200,
                                       "description": "Words to look for (every word must match)"}}
    if isinstance(backend, drf_filters.OrderingFilter):
        return {backend.ordering_param: _ordering_schema(backend, view, model)}
    get_filterset_class = getattr(backend, "get_filterset_class", None)  # django-filter's DjangoFilterBackend
    if get_filterset_class is not None:
        filterset = get_filterset_class(view, model._default_manager.all())
        filters = filterset.base_filters if filterset is not None else {}
        return {name: _filter_schema(name, item) for name, item in filters.items()}
    return {}


def _ordering_schema(backend, view, model) -> dict:
    schema = {"type": "string", "description": "Sort by this field (a leading - sorts descending)"}
    fields = getattr(view, "ordering_fields", None)
    if isinstance(fields, (list, tuple)):
        names = [item if isinstance(item, str) else item[0] for item in fields]
        schema["enum"] = [value for name in names for value in (name, f"-{name}")]
    return schema


def _filter_schema(name, item) -> dict:
    description = str(item.label) if item.label is not None else name
    choices = item.extra.get("choices")
    if choices and not callable(choices):
        return {"type": "string", "enum": [str(value) for value, _ in choices], "description": description}
    return {"type": _QUERY_VALUE, "description": description}


def _query_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _detail(data) -> str:
    """DRF's error body as one line: ``title: This field may not be blank.; year: ...``."""
    if isinstance(data, dict):
        if set(data) == {"detail"}:
            return str(data["detail"])
        parts = []
        for name, messages in data.items():
            said = _detail(messages)
            parts.append(said if name in ("non_field_errors", "detail") else f"{name}: {said}")
        return "; ".join(parts)
    if isinstance(data, list):
        return " ".join(_detail(item) for item in data)
    return str(data)


def register_viewset(viewset, registry=None, **options) -> ViewSetToolset:
    """Register the tools of a DRF viewset; ``name`` sets the prefix (default: its model's name),
    ``actions`` limits them to those action names, ``serializer_class`` and ``model`` replace the
    viewset's for the schemas."""
    if not isinstance(viewset, type) or not hasattr(viewset, "get_extra_actions"):
        raise ImproperlyConfigured(f"{viewset!r} is not a viewset class (rest_framework.viewsets).")
    return ViewSetToolset(viewset, **options).register(registry or default_registry)


__all__ = ["ViewSetToolset", "register_viewset"]
