"""Turning JSON into the client's frozen dataclasses, and request dataclasses into JSON.

The client's models are plain standard-library dataclasses so that a worker host needs no
pydantic. One small converter reads their type hints instead of a hand-written ``from_dict``
per class: it follows ``list[X]``, ``dict[str, X]``, ``X | None``, nested dataclasses,
string enums and the JSON scalars, ignores fields the client does not know (a newer server
may add some) and reports the path of the first value that does not fit.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from typing import Any, TypeVar, Union, get_args, get_origin

T = TypeVar("T")


class ResponseShapeError(ValueError):
    """A response body did not have the shape the client expects at ``path``."""

    def __init__(self, path: str, expected: str, value: Any) -> None:
        super().__init__(f"{path or 'body'}: expected {expected}, got {type(value).__name__}")
        self.path = path


_HINTS: dict[type[Any], dict[str, Any]] = {}


def _hints(cls: type[Any]) -> dict[str, Any]:
    """The resolved type hints of a dataclass, computed once per class; in a subclass of a
    generic one (``JobPage(Page[Job])``) its type variables stand for their arguments."""
    if cls not in _HINTS:
        bound = _type_arguments(cls)
        _HINTS[cls] = {
            name: _bind(hint, bound) for name, hint in typing.get_type_hints(cls).items()
        }
    return _HINTS[cls]


def _type_arguments(cls: type[Any]) -> dict[Any, Any]:
    """What the type variables of ``cls``'s generic bases stand for in ``cls``."""
    bound: dict[Any, Any] = {}
    for base in getattr(cls, "__orig_bases__", ()):
        origin = get_origin(base)
        if origin is not None:
            bound.update(zip(getattr(origin, "__parameters__", ()), get_args(base), strict=False))
    return bound


def _bind(hint: Any, bound: dict[Any, Any]) -> Any:
    if isinstance(hint, TypeVar):
        return bound.get(hint, Any)
    parameters = getattr(hint, "__parameters__", ())
    if parameters:
        return hint[tuple(bound.get(parameter, Any) for parameter in parameters)]
    return hint


def parse(cls: type[T], data: Any) -> T:
    """``data`` (decoded JSON) as an instance of the dataclass ``cls``."""
    return typing.cast(T, _convert(cls, data, ""))


def _convert(hint: Any, value: Any, path: str) -> Any:
    if hint is Any or hint is object:
        return value
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        options = get_args(hint)
        if value is None and type(None) in options:
            return None
        for option in options:
            if option is type(None):
                continue
            try:
                return _convert(option, value, path)
            except ResponseShapeError:
                continue
        raise ResponseShapeError(path, str(hint), value)
    if origin is list:
        if not isinstance(value, list):
            raise ResponseShapeError(path, "a list", value)
        (item,) = get_args(hint)
        return [_convert(item, element, f"{path}[{index}]") for index, element in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ResponseShapeError(path, "an object", value)
        _key, item = get_args(hint)
        return {key: _convert(item, element, f"{path}.{key}") for key, element in value.items()}
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return _dataclass(hint, value, path)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(value)
        except ValueError:
            raise ResponseShapeError(path, f"one of {[m.value for m in hint]}", value) from None
    if hint is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if hint in (str, int, bool) and type(value) is hint:
        return value
    if hint is type(None) and value is None:
        return None
    raise ResponseShapeError(path, getattr(hint, "__name__", str(hint)), value)


def _dataclass(cls: type[Any], value: Any, path: str) -> Any:
    if not isinstance(value, dict):
        raise ResponseShapeError(path, f"an object ({cls.__name__})", value)
    hints = _hints(cls)
    arguments: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        key = field.metadata.get("json", field.name)
        if key in value:
            arguments[field.name] = _convert(hints[field.name], value[key], f"{path}.{key}")
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise ResponseShapeError(f"{path}.{key}", "a value (the field is missing)", None)
    return cls(**arguments)


class Null(enum.Enum):
    """The marker of a field sent as JSON ``null`` (a request field left at None is not
    sent at all): in a merge patch, ``null`` clears a value."""

    NULL = "null"


#: Send this field as ``null``: ``WorkerPatch(rank=NULL)`` removes the worker's rank.
NULL = Null.NULL


def to_json(request: Any) -> dict[str, Any]:
    """A request dataclass as a JSON object, leaving out the fields left at None so that
    the server applies its own defaults (and sending :data:`NULL` as ``null``)."""
    body: dict[str, Any] = {}
    for field in dataclasses.fields(request):
        value = getattr(request, field.name)
        if value is None:
            continue
        if value is NULL:
            body[field.metadata.get("json", field.name)] = None
            continue
        body[field.metadata.get("json", field.name)] = _plain(value)
    return body


def without_none(body: dict[str, Any]) -> dict[str, Any]:
    """A JSON body written as a dict, leaving out its fields at None as :func:`to_json`
    does for a request dataclass (so that the server applies its own defaults)."""
    return {key: value for key, value in body.items() if value is not None}


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_json(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, list | tuple):
        return [_plain(element) for element in value]
    if isinstance(value, dict):
        return {key: _plain(element) for key, element in value.items()}
    return value
