"""The one JSON codec of the bundle's records (bundle.json, edge.json): a dataclass tree to JSON
and back, checked field by field so a wrong file is refused naming its key.

Writing: fields in their declared order (so the bytes stay the same between builds); a field
whose default is None is left out when None; a field without a default is always written (null
when it is None: a metric a model has no value for). Reading: every field without a default
must be there; unknown keys are ignored (a newer writer may add some; a removed or changed key
raises schema_version instead).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal

from bundler.bundle.modelio import TensorSpec

JSON = dict[str, Any]


def to_json(value: Any) -> Any:
    if isinstance(value, TensorSpec):
        return value.to_json()
    if dataclasses.is_dataclass(value):
        data = {}
        for field in dataclasses.fields(value):
            item = getattr(value, field.name)
            if item is None and field.default is None:
                continue  # optional and absent: not written
            data[field.name] = to_json(item)
        return data
    if isinstance(value, dict):
        return {key: to_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(item) for item in value]
    return value


def versioned_json(record: Any) -> JSON:
    """A manifest record as JSON with its `schema_version` field first (a reader checks it
    before anything else)."""
    data = to_json(record)
    return {"schema_version": data.pop("schema_version"), **data}


class Invalid(Exception):
    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")


_PRIMITIVES = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}


def from_json(kind: Any, data: Any, where: str, file: str) -> Any:
    """`data` checked against the type `kind` and converted to it; Invalid naming the key."""
    origin = typing.get_origin(kind)
    if kind is Any:
        return data
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(kind)
        if data is None and type(None) in options:
            return None
        for option in (option for option in options if option is not type(None)):
            try:
                return from_json(option, data, where, file)
            except Invalid:
                continue
        raise Invalid(where, f"unexpected value {data!r}")
    if origin is Literal:
        if data not in typing.get_args(kind):
            raise Invalid(where, f"expected one of {typing.get_args(kind)}, got {data!r}")
        return data
    if origin is list:
        if not isinstance(data, list):
            raise Invalid(where, f"expected a list, got {data!r}")
        (item,) = typing.get_args(kind)
        return [from_json(item, value, f"{where}[{i}]", file) for i, value in enumerate(data)]
    if origin is tuple:  # tuple[X, ...]: a list in JSON
        (item, _) = typing.get_args(kind)
        return tuple(from_json(list[item], data, where, file))  # type: ignore[valid-type]
    if origin is dict:
        if not isinstance(data, dict):
            raise Invalid(where, f"expected an object, got {data!r}")
        _, item = typing.get_args(kind)
        return {key: from_json(item, value, f"{where}.{key}", file) for key, value in data.items()}
    if kind is TensorSpec:
        spec = from_json(dict[str, Any], data, where, file)
        for key in ("name", "type", "shape"):
            if key not in spec:
                raise Invalid(where, f"missing {key!r}")
        return TensorSpec.from_json(spec)
    if dataclasses.is_dataclass(kind):
        if not isinstance(data, dict):
            raise Invalid(where, f"expected an object, got {data!r}")
        hints = typing.get_type_hints(kind)
        values = {}
        for field in dataclasses.fields(kind):
            if field.name in data:
                values[field.name] = from_json(hints[field.name], data[field.name],
                                               f"{where}.{field.name}".lstrip("."), file)
            elif field.default is dataclasses.MISSING and \
                    field.default_factory is dataclasses.MISSING:
                raise Invalid(where or file, f"missing key {field.name!r}")
        return kind(**values)
    if kind is float and isinstance(data, int | float) and not isinstance(data, bool):
        return float(data)
    if kind in _PRIMITIVES:
        if type(data) is not kind:
            raise Invalid(where, f"expected {_PRIMITIVES[kind]}, got {data!r}")
        return data
    raise TypeError(f"no JSON reading for {kind!r}")  # a field type this module forgot
