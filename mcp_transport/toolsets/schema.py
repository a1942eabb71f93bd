"""JSON Schemas and JSON values of a model's fields.

A field's schema describes the value ``value_of`` gives for it: what ``DjangoJSONEncoder``
makes of the Python value (dates and times in ISO 8601, to the microsecond; decimals and UUIDs as strings), a
foreign key as its target's key, a many-to-many field as a list of keys.
"""
import datetime

from django.core.exceptions import FieldDoesNotExist, ImproperlyConfigured
from django.core.serializers.json import DjangoJSONEncoder
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

_INTEGER = {"type": "integer"}
_STRING = {"type": "string"}
_BY_TYPE = {
    models.BooleanField: {"type": "boolean"},
    models.FloatField: {"type": "number"},
    models.DecimalField: {"type": "string", "format": "decimal"},
    models.DateTimeField: {"type": "string", "format": "date-time"},  # before DateField: a subclass
    models.DateField: {"type": "string", "format": "date"},
    models.TimeField: {"type": "string", "format": "time"},
    models.DurationField: {"type": "string", "format": "duration"},
    models.UUIDField: {"type": "string", "format": "uuid"},
    models.EmailField: {"type": "string", "format": "email"},
    models.URLField: {"type": "string", "format": "uri"},
    models.JSONField: {},
    models.FileField: _STRING,
    models.AutoField: _INTEGER,
    models.BigAutoField: _INTEGER,
    models.SmallAutoField: _INTEGER,
    models.IntegerField: _INTEGER,
    models.CharField: _STRING,
    models.TextField: _STRING,
    models.GenericIPAddressField: _STRING,
    models.FilePathField: _STRING,
}

_encoder = DjangoJSONEncoder()


def model_field(model, name: str):
    """The model's field ``name`` (``pk`` names the primary key); ImproperlyConfigured otherwise."""
    try:
        return model._meta.pk if name == "pk" else model._meta.get_field(name)
    except FieldDoesNotExist:
        raise ImproperlyConfigured(f"{model.__name__} has no field {name!r}.") from None


def field_path(model, path: str):
    """The field a lookup path such as ``author__name`` ends on."""
    *relations, last = path.split("__")
    for name in relations:
        related = model_field(model, name)
        if not related.is_relation:
            raise ImproperlyConfigured(f"{model.__name__}.{name} is not a relation (in {path!r}).")
        model = related.related_model
    return model_field(model, last)


def field_schema(field) -> dict:
    """The JSON Schema of the value ``value_of`` gives for ``field``."""
    if field.many_to_many:
        return {"type": "array", "items": _base_schema(field.target_field)}
    schema = dict(_base_schema(field.target_field if field.is_relation else field))
    if field.choices and not field.is_relation:
        schema["enum"] = [value for value, _ in field.flatchoices]
    if getattr(field, "max_length", None) and schema.get("type") == "string" and not field.is_relation:
        schema["maxLength"] = field.max_length
    if schema.get("type") in ("integer", "number"):
        schema.update(_range(field))
    if field.null and "type" in schema:
        schema["type"] = [schema["type"], "null"]
        if "enum" in schema:
            schema["enum"] = [*schema["enum"], None]
    return _describe(schema, field)


def _base_schema(field) -> dict:
    for kind in type(field).__mro__:
        if kind in _BY_TYPE:
            return _BY_TYPE[kind]
    raise ImproperlyConfigured(f"{field.model.__name__}.{field.name} ({type(field).__name__}) has no JSON form here: "
                               "leave it out of the toolset's fields.")


def _range(field) -> dict:
    """The field's own bounds and the database's (IntegerField.validators has both): an
    argument beyond them is refused by the schema, not by the database."""
    bounds = {}
    for validator in field.validators:
        if isinstance(validator, MinValueValidator) and not callable(validator.limit_value):
            bounds["minimum"] = max(bounds.get("minimum", validator.limit_value), validator.limit_value)
        elif isinstance(validator, MaxValueValidator) and not callable(validator.limit_value):
            bounds["maximum"] = min(bounds.get("maximum", validator.limit_value), validator.limit_value)
    return bounds


def _describe(schema, field) -> dict:
    title = str(getattr(field, "verbose_name", "") or "")
    if title and title != field.name.replace("_", " "):
        schema["title"] = title
    if getattr(field, "help_text", ""):
        schema["description"] = str(field.help_text)
    return schema


def value_of(obj, field):
    """The JSON value of ``obj``'s ``field``."""
    if field.many_to_many:
        return [_json(related.pk) for related in getattr(obj, field.name).all()]
    if field.is_relation:
        return _json(getattr(obj, field.attname))
    value = field.value_from_object(obj)
    if isinstance(field, models.FileField):
        return value.name or None
    return _json(value)


def _json(value):
    if value is None or isinstance(value, (bool, int, float, str, list, dict)):
        return value
    if isinstance(value, (datetime.datetime, datetime.time)):
        return value.isoformat()  # to the microsecond (DjangoJSONEncoder stops at milliseconds)
    return _encoder.default(value)


def exact_text(obj, field):
    """The value as text that ``parse_value`` reads back exactly (None stays None)."""
    return None if field.value_from_object(obj) is None else field.value_to_string(obj)


def parse_value(field, value):
    """A JSON argument as the Python value of ``field`` (raises ValidationError)."""
    if field.is_relation:
        field = field.target_field
    if value is None:
        return None
    return field.to_python(value)
