"""A request's params as a handler reads them: a missing or mistyped one is -32602."""
from ..protocol.errors import InvalidParams


def string_param(params, name):
    value = params.get(name)
    if not isinstance(value, str) or not value:
        raise InvalidParams(f'"{name}" must be a non-empty string.')
    return value


def object_param(params, name):
    value = params.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidParams(f'"{name}" must be an object.')
    return value
