"""The declared filters and search of a list tool: their arguments' schemas, and the queryset.

``filters = {"year": ["gte", "lte"], "author": ["exact"]}`` gives the arguments ``year__gte``,
``year__lte`` and ``author`` (``exact`` is the bare path, as in Django's lookups). Only declared
lookups become arguments, and the list tool's schema refuses any other argument.
"""
import operator
from functools import reduce

from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db.models import Q

from ..conf import get_config
from .schema import field_path, field_schema, parse_value

_TEXT = {"iexact": "equals (any case)", "contains": "contains", "icontains": "contains (any case)",
         "startswith": "starts with", "istartswith": "starts with (any case)"}
_COMPARE = {"exact": "equals", "gt": "greater than", "gte": "at least", "lt": "less than", "lte": "at most"}
LOOKUPS = frozenset({*_TEXT, *_COMPARE, "in", "isnull"})
#: Values an ``__in`` filter may list.
IN_MAX_ITEMS = 100


def argument_name(path: str, lookup: str) -> str:
    return path if lookup == "exact" else f"{path}__{lookup}"


def declared(model, filters: dict) -> dict:
    """{argument name: (path, lookup, field)}; ImproperlyConfigured for an unknown path or lookup."""
    arguments = {}
    for path, lookups in filters.items():
        field = field_path(model, path)
        for lookup in ([lookups] if isinstance(lookups, str) else lookups):
            if lookup not in LOOKUPS:
                raise ImproperlyConfigured(f"Unknown lookup {lookup!r} for {path!r}; use {', '.join(sorted(LOOKUPS))}.")
            arguments[argument_name(path, lookup)] = (path, lookup, field)
    return arguments


def argument_schema(path, lookup, field) -> dict:
    value = field_schema(field)
    value.pop("title", None)
    if lookup == "isnull":
        return {"type": "boolean", "description": f"{path} is empty (true) or not (false)"}
    if lookup == "in":
        return {"type": "array", "items": _not_null(value), "maxItems": IN_MAX_ITEMS,
                "description": f"{path} is one of these"}
    if lookup in _TEXT:
        return {"type": "string", "description": f"{path} {_TEXT[lookup]}"}
    if lookup != "exact":  # "less than null" means nothing: only exact takes null (isnull)
        value = _not_null(value)
    return {**value, "description": f"{path} {_COMPARE[lookup]}"}


def _not_null(schema: dict) -> dict:
    if isinstance(schema.get("type"), list):
        schema = {**schema, "type": schema["type"][0]}
        if "enum" in schema:
            schema["enum"] = [value for value in schema["enum"] if value is not None]
    return schema


def apply(queryset, arguments: dict, given: dict):
    """The queryset narrowed by the filter arguments in ``given``; ValidationError names the bad one."""
    conditions = {}
    for name, (path, lookup, field) in arguments.items():
        if name in given:
            conditions[f"{path}__{lookup}"] = _value(name, lookup, field, given[name])
    return queryset.filter(**conditions) if conditions else queryset


def _value(name, lookup, field, value):
    try:
        if lookup == "in":
            return [parse_value(field, item) for item in value]
        if lookup == "isnull" or lookup in _TEXT:
            return value
        return parse_value(field, value)
    except ValidationError as exc:
        raise ValidationError(f"{name}: {' '.join(exc.messages)}") from None


# -- search, as the admin's search_fields ------------------------------------------------------

_PREFIXES = {"^": "istartswith", "=": "iexact", "@": "search"}


def search_words(term: str) -> list:
    """The words of a search, each once: at most SEARCH_MAX_TERMS (ValidationError), since each
    is one more condition over every search field (100 one-letter words cost PostgreSQL 9 s on
    300,000 rows)."""
    words = list(dict.fromkeys(term.split()))
    bound_search_terms(len(words), "words")
    return words


def bound_search_terms(count: int, noun: str = "terms") -> None:
    """Refuses (ValidationError) a search of more than SEARCH_MAX_TERMS terms, counted as the
    search that runs will count them: the toolsets' own search by its words, a DRF SearchFilter
    by its ``get_search_terms`` (drf.py)."""
    limit = get_config()["SEARCH_MAX_TERMS"]
    if count > limit:
        raise ValidationError(f"A search takes at most {limit} {noun}; this one has {count}.")


def search(queryset, search_fields, term: str):
    """Rows where every word of ``term`` is found in one of the fields (the admin's rule: plain
    names ``icontains``, ``^`` starts with, ``=`` equals, ``@`` full-text search)."""
    lookups = [_search_lookup(name) for name in search_fields]
    for word in search_words(term):
        queryset = queryset.filter(reduce(operator.or_, (Q(**{lookup: word}) for lookup in lookups)))
    return queryset


def _search_lookup(name: str) -> str:
    if name[:1] in _PREFIXES:
        return f"{name[1:]}__{_PREFIXES[name[0]]}"
    return f"{name}__icontains"
