"""Create and update through a ModelForm: the arguments as the form's data, its errors as text.

A field left out of a create takes the model field's default (a ModelForm would read a missing
boolean as an unticked checkbox); a field left out of an update keeps its value.
"""
from django.core.exceptions import FieldDoesNotExist
from django.forms.models import model_to_dict

from .schema import field_schema


def input_properties(model, form_class, *, partial: bool) -> tuple:
    """(properties, required) of the form's fields, described by the model's fields."""
    properties, required = {}, []
    for name, form_field in form_class.base_fields.items():
        properties[name] = _form_field_schema(model, name, form_field)
        field = _model_field_or_none(model, name)
        if form_field.required and not partial and not (field is not None and field.has_default()):
            required.append(name)
    return properties, required


def _form_field_schema(model, name, form_field) -> dict:
    """The model field's schema; a form field of its own (not the model's) takes any value."""
    try:
        return field_schema(model._meta.get_field(name))
    except FieldDoesNotExist:
        return {"description": str(form_field.help_text or form_field.label or name)}


def create_data(model, form_class, arguments: dict) -> dict:
    data = dict(arguments)
    for name in form_class.base_fields:
        field = _model_field_or_none(model, name)
        if name not in data and field is not None and field.has_default():
            data[name] = field.get_default()
    return data


def update_data(instance, form_class, arguments: dict) -> dict:
    names = list(form_class.base_fields)
    data = model_to_dict(instance, fields=names)
    for name in names:
        field = _model_field_or_none(type(instance), name)
        if field is not None and field.many_to_many:
            data[name] = [related.pk for related in data.get(name) or []]
    data.update(arguments)
    return data


def _model_field_or_none(model, name):
    try:
        return model._meta.get_field(name)
    except FieldDoesNotExist:
        return None


def errors_text(form) -> str:
    parts = []
    for name, errors in form.errors.get_json_data().items():
        messages = " ".join(error["message"] for error in errors)
        parts.append(messages if name == "__all__" else f"{name}: {messages}")
    return "; ".join(parts)
