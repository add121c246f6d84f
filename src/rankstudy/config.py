"""Typed configs: dataclasses filled from the (schema-validated) YAML config.

The workflow validates the whole config against ``workflow/schemas/config.schema.yaml`` and
passes each step its section as JSON; ``from_dict`` turns that section into a dataclass and
rejects keys the dataclass does not know, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from typing import Any, Mapping, TypeVar

from rankstudy.errors import StudyError

T = TypeVar("T")


class ConfigError(StudyError):
    """A config section does not match its dataclass."""


def from_dict(cls: type[T], data: Mapping[str, Any], where: str = "config") -> T:
    """Build dataclass ``cls`` from ``data``, recursing into nested dataclass fields."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    fields = {field.name: field for field in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; expected some of {', '.join(fields)}")
    hints = typing.get_type_hints(cls)
    values = {}
    for name, value in data.items():
        hint = hints[name]
        if dataclasses.is_dataclass(hint) and isinstance(value, Mapping):
            value = from_dict(hint, value, f"{where}.{name}")
        values[name] = value
    try:
        return cls(**values)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"{where}: {error}") from None


def from_json(cls: type[T], text: str, where: str = "config") -> T:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(f"{where}: invalid JSON ({error})") from None
    return from_dict(cls, data, where)


def is_int(value: Any) -> bool:
    """An int that is no bool (YAML's ``true`` is no count)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """A finite int or float that is no bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_ints(settings: Any, *names: str, minimum: int = 1, nullable: bool = False) -> None:
    """The dataclasses' one integer check: ValueError naming the first of ``settings``' fields ``names`` that is
    not an integer >= ``minimum`` (a positive one by default; or None, where ``nullable``)."""
    for name in names:
        value = getattr(settings, name)
        if (value is None and nullable) or (is_int(value) and value >= minimum):
            continue
        wanted = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"{name} must be {'null or ' if nullable else ''}{wanted}, got {value!r}")


def check_int_list(name: str, values: Any, pairs: bool = False) -> None:
    """ValueError unless ``values`` is a non-empty list of positive ints (or of [h, w] pairs)."""
    if not isinstance(values, (list, tuple)) or not values:
        raise ValueError(f"{name} must be a non-empty list, got {values!r}")
    for value in values:
        items = value if pairs else [value]
        if pairs and (not isinstance(value, (list, tuple)) or len(value) != 2):
            raise ValueError(f"{name} entries must be [height, width] pairs, got {value!r}")
        if not all(is_int(v) and v > 0 for v in items):
            raise ValueError(f"{name} entries must be positive integers, got {value!r}")
