"""Typed configs: dataclasses filled from the (schema-validated) YAML config.

The workflow validates the whole config against ``workflow/schemas/config.schema.yaml`` and
passes each step its section as JSON; ``from_dict`` turns that section into a dataclass and
rejects keys the dataclass does not know, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import dataclasses
import json
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
