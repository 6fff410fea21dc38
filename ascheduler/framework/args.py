"""Plugin arguments: a dataclass per plugin, decoded from `pluginConfig[].args` and back.

A plugin declares its arguments as a frozen dataclass whose fields have defaults; this module
reads a `KubeSchedulerConfiguration`'s camelCase mapping into it (`ignoredResourceGroups` ->
`ignored_resource_groups`, or the name a field gives as `metadata={"key": ...}`), checking
every value against the field's type and reporting every problem with its path. A dataclass may
check more in `__post_init__` by raising `PluginArgsError("field: message")`.

Types understood: bool, int, float, str, `Seconds` (a duration: a number of seconds, or Go's
text such as `30s`), `Literal[...]`, Enum subclasses (by value), nested dataclasses,
`tuple[X, ...]`, `list[X]`, `dict[str, X]` / `Mapping[str, X]`, `X | Y` (the first member
that takes the value), `X | None`, Any. Durations are written back as Go prints them.
`encode` turns a value back into the mapping (`config defaults` prints it).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from ascheduler.durations import go_duration, parse_seconds
from ascheduler.framework.errors import ConfigError, PluginArgsError

T = TypeVar("T")


class Seconds(float):
    """A duration in seconds; configuration may write it as a number or as Go's `30s`, `1m`."""

    def __repr__(self) -> str:
        return go_duration(self)


def key_of(field: dataclasses.Field[Any]) -> str:
    """The configuration's name of a field: its metadata `key`, else its camelCase name."""
    explicit = field.metadata.get("key")
    if isinstance(explicit, str):
        return explicit
    head, *rest = field.name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def decode(cls: type[T], raw: Any, path: str) -> T:
    """`raw` (None: every default) as a `cls`; ConfigError listing each problem with its path
    (`<path>.scoringStrategy.resources[1].weight: ...`)."""
    problems: list[str] = []
    value = _decode(cls, {} if raw is None else raw, path, problems)
    if problems:
        raise ConfigError(problems)
    return typing.cast(T, value)


def _describe(value: Any) -> str:
    return f"{type(value).__name__} {value!r}" if not isinstance(value, Mapping) else "an object"


def _decode(tp: Any, raw: Any, path: str, problems: list[str]) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return raw
    if origin in (typing.Union, types.UnionType):
        if raw is None and type(None) in args:
            return None
        members = [a for a in args if a is not type(None)]
        if len(members) == 1:
            return _decode(members[0], raw, path, problems)
        for member in members:
            attempt: list[str] = []
            value = _decode(member, raw, path, attempt)
            if not attempt:
                return value
        names = " or ".join(_type_name(m) for m in members)
        problems.append(f"{path}: expected {names}, got {_describe(raw)}")
        return None
    if origin is typing.Literal:
        for choice in args:
            if choice == raw and type(choice) is type(raw):
                return raw
        choices = ", ".join(repr(a) for a in args)
        problems.append(f"{path}: must be one of {choices}, got {raw!r}")
        return args[0]
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _decode_dataclass(tp, raw, path, problems)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        for member in tp:
            # By value and type: `true` is not the member whose value is 1.
            if member.value == raw and type(member.value) is type(raw):
                return member
        choices = ", ".join(repr(m.value) for m in tp)
        problems.append(f"{path}: must be one of {choices}, got {raw!r}")
        return next(iter(tp))
    if origin in (tuple, list):
        if not isinstance(raw, list):
            problems.append(f"{path}: expected a list, got {_describe(raw)}")
            return origin()
        item = args[0] if args else Any
        items = [_decode(item, v, f"{path}[{i}]", problems) for i, v in enumerate(raw)]
        return tuple(items) if origin is tuple else items
    if origin in (dict, Mapping, typing.Mapping):
        if not isinstance(raw, Mapping):
            problems.append(f"{path}: expected an object, got {_describe(raw)}")
            return {}
        value_type = args[1] if len(args) == 2 else Any
        return {str(k): _decode(value_type, v, f"{path}.{k}", problems) for k, v in raw.items()}
    if tp is Seconds:
        try:
            if isinstance(raw, bool) or not isinstance(raw, int | float | str):
                raise ValueError(f"not a duration: {raw!r}")
            seconds = float(raw) if not isinstance(raw, str) else parse_seconds(raw)
            if not math.isfinite(seconds):
                raise ValueError(f"not a duration: {raw!r}")
        except ValueError as exc:
            problems.append(f"{path}: {exc}")
            return Seconds(0)
        if seconds < 0:
            problems.append(f"{path}: must not be negative, got {raw!r}")
        return Seconds(seconds)
    if tp is bool:
        if not isinstance(raw, bool):
            problems.append(f"{path}: expected true or false, got {raw!r}")
            return False
        return raw
    if tp is int:
        if not isinstance(raw, int) or isinstance(raw, bool):
            problems.append(f"{path}: expected an integer, got {raw!r}")
            return 0
        return raw
    if tp is float:
        if not isinstance(raw, int | float) or isinstance(raw, bool) or not math.isfinite(raw):
            problems.append(f"{path}: expected a finite number, got {raw!r}")
            return 0.0
        return float(raw)
    if tp is str:
        if not isinstance(raw, str):
            problems.append(f"{path}: expected a string, got {raw!r}")
            return ""
        return raw
    raise TypeError(f"{path}: argument type {tp!r} is not supported")


def _type_name(tp: Any) -> str:
    if tp is Seconds:
        return "a duration"
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    if tp in names:
        return names[tp]
    origin = typing.get_origin(tp)
    if origin in (tuple, list):
        return "a list"
    if origin in (dict, Mapping, typing.Mapping) or dataclasses.is_dataclass(tp):
        return "an object"
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    return getattr(tp, "__name__", repr(tp))


def _decode_dataclass(cls: type[Any], raw: Any, path: str, problems: list[str]) -> Any:
    if not isinstance(raw, Mapping):
        problems.append(f"{path}: expected an object, got {_describe(raw)}")
        return _placeholder(cls)
    hints = typing.get_type_hints(cls)
    fields = {key_of(f): f for f in dataclasses.fields(cls) if f.init}
    for key in raw:
        if key not in fields:
            problems.append(f"{path}.{key}: unknown field")
    values: dict[str, Any] = {}
    before = len(problems)
    for key, f in fields.items():
        if key in raw:
            values[f.name] = _decode(hints[f.name], raw[key], f"{path}.{key}", problems)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            problems.append(f"{path}.{key}: required")
    if len(problems) > before:
        return _placeholder(cls)  # its parts are reported; checking the whole would repeat them
    try:
        return cls(**values)
    except PluginArgsError as exc:
        problems.append(f"{path}.{exc}" if path else str(exc))
    except TypeError as exc:  # a field without a default, left out
        problems.append(f"{path}: {exc}")
    return _placeholder(cls)


def _placeholder(cls: type[Any]) -> Any:
    """Something to carry on with once a problem is reported (the result is never used)."""
    try:
        return cls()
    except (TypeError, PluginArgsError):
        return None


def encode(value: Any) -> Any:
    """A decoded value back as configuration (camelCase keys, lists, plain values)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            key_of(f): encode(getattr(value, f.name))
            for f in dataclasses.fields(value)
            # An optional field left unset (None where the default is not None is written),
            # and what a dataclass derives from its fields, are not configuration.
            if f.init and not (getattr(value, f.name) is None and f.default is None)
        }
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Seconds):
        return go_duration(value)
    if isinstance(value, tuple | list):
        return [encode(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): encode(v) for k, v in value.items()}
    return value
