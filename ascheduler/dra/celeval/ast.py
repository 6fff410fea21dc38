"""The checked AST of a compiled selector, read from cel-cpp's serialized form.

`Expression.serialize()` in cel-expr-python answers a `google.protobuf.Any` holding a
`cel.expr.CheckedExpr`. Only a handful of messages and fields matter here (the expression
tree and the checker's reference map, which names the overload chosen for every call), so
they are read straight from the protobuf wire format: no generated classes, no descriptor
pool, and nothing but this file to keep in step with the format, which is frozen.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

_CHECKED_EXPR: Final = "type.googleapis.com/cel.expr.CheckedExpr"


class MalformedAst(ValueError):
    """The bytes are not a serialized checked expression."""


@dataclass(slots=True)
class Expr:
    """One node. `kind` is const, ident, select, call, list, map, struct or comprehension."""

    id: int = 0
    kind: str = ""
    #: const: the value (None, bool, int, float, str, bytes, or Uint for uint64 literals).
    value: object = None
    #: ident: the name; select: the field; call: the function; comprehension: the iter var.
    name: str = ""
    #: select: operand; call: target (or None); comprehension: iter range.
    operand: Expr | None = None
    test_only: bool = False
    #: call arguments; list elements; comprehension: accu init, condition, step, result.
    args: list[Expr] = field(default_factory=list)
    #: list: indices of optional elements; map: which entries are optional.
    optional: list[int] = field(default_factory=list)
    #: map entries as (key, value) pairs.
    entries: list[tuple[Expr, Expr]] = field(default_factory=list)
    #: comprehension: the accumulator and second iteration variable.
    accu: str = ""
    name2: str = ""


class Uint(int):
    """A CEL uint constant (cel-go keeps it apart from int)."""


@dataclass(slots=True)
class Reference:
    name: str = ""
    overloads: list[str] = field(default_factory=list)
    value: object = None
    has_value: bool = False


@dataclass(slots=True)
class CheckedAst:
    expr: Expr
    references: dict[int, Reference]


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise MalformedAst("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value): varints and fixed64 as ints, length-delimited as bytes."""
    pos, end = 0, len(data)
    while pos < end:
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            yield number, value
        elif wire == 1:
            yield number, int.from_bytes(data[pos : pos + 8], "little")
            pos += 8
        elif wire == 2:
            size, pos = _varint(data, pos)
            yield number, data[pos : pos + size]
            pos += size
        elif wire == 5:
            yield number, int.from_bytes(data[pos : pos + 4], "little")
            pos += 4
        else:
            raise MalformedAst(f"unsupported wire type {wire}")
    if pos != end:
        raise MalformedAst("truncated message")


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _bytes(value: int | bytes) -> bytes:
    if not isinstance(value, bytes):
        raise MalformedAst("expected a length-delimited field")
    return value


def _int(value: int | bytes) -> int:
    if isinstance(value, bytes):
        raise MalformedAst("expected a varint field")
    return value


class UnsupportedConstant(MalformedAst):
    """A literal kind the evaluator does not model (durations, timestamps)."""


def _constant(data: bytes) -> object:
    for number, value in _fields(data):
        if number == 1:
            return None
        if number == 2:
            return bool(_int(value))
        if number == 3:
            return _signed(_int(value))
        if number == 4:
            return Uint(_int(value))
        if number == 5:
            return float(struct.unpack("<d", _int(value).to_bytes(8, "little"))[0])
        if number == 6:
            return _bytes(value).decode()
        if number == 7:
            return _bytes(value)
        raise UnsupportedConstant(f"constant field {number}")
    return None


def _expr(data: bytes) -> Expr:
    node = Expr()
    for number, value in _fields(data):
        if number == 2:
            node.id = _signed(_int(value))
        elif number == 3:
            node.kind, node.value = "const", _constant(_bytes(value))
        elif number == 4:
            node.kind = "ident"
            for n, v in _fields(_bytes(value)):
                if n == 1:
                    node.name = _bytes(v).decode()
        elif number == 5:
            node.kind = "select"
            for n, v in _fields(_bytes(value)):
                if n == 1:
                    node.operand = _expr(_bytes(v))
                elif n == 2:
                    node.name = _bytes(v).decode()
                elif n == 3:
                    node.test_only = bool(_int(v))
        elif number == 6:
            node.kind = "call"
            for n, v in _fields(_bytes(value)):
                if n == 1:
                    node.operand = _expr(_bytes(v))
                elif n == 2:
                    node.name = _bytes(v).decode()
                elif n == 3:
                    node.args.append(_expr(_bytes(v)))
        elif number == 7:
            node.kind = "list"
            for n, v in _fields(_bytes(value)):
                if n == 1:
                    node.args.append(_expr(_bytes(v)))
                elif n == 2:
                    node.optional.extend(_packed(v))
        elif number == 8:
            _struct(node, _bytes(value))
        elif number == 9:
            _comprehension(node, _bytes(value))
    if not node.kind:
        raise MalformedAst(f"expression {node.id} has no kind")
    return node


def _packed(value: int | bytes) -> list[int]:
    if not isinstance(value, bytes):
        return [value]
    out, pos = [], 0
    while pos < len(value):
        item, pos = _varint(value, pos)
        out.append(item)
    return out


def _struct(node: Expr, data: bytes) -> None:
    node.kind = "map"
    for n, v in _fields(data):
        if n == 1:
            node.kind, node.name = "struct", _bytes(v).decode()
        elif n == 2:
            key = val = None
            optional = False
            for en, ev in _fields(_bytes(v)):
                if en == 2:
                    node.kind = "struct"
                elif en == 3:
                    key = _expr(_bytes(ev))
                elif en == 4:
                    val = _expr(_bytes(ev))
                elif en == 5:
                    optional = bool(_int(ev))
            if key is None or val is None:
                raise MalformedAst("map entry without key or value")
            if optional:
                node.optional.append(len(node.entries))
            node.entries.append((key, val))


def _comprehension(node: Expr, data: bytes) -> None:
    node.kind = "comprehension"
    parts: dict[int, Expr] = {}
    for n, v in _fields(data):
        if n == 1:
            node.name = _bytes(v).decode()
        elif n == 3:
            node.accu = _bytes(v).decode()
        elif n == 8:
            node.name2 = _bytes(v).decode()
        elif n in (2, 4, 5, 6, 7):
            parts[n] = _expr(_bytes(v))
    try:
        node.operand = parts[2]
        node.args = [parts[4], parts[5], parts[6], parts[7]]
    except KeyError:
        raise MalformedAst("incomplete comprehension") from None


def _reference(data: bytes) -> Reference:
    ref = Reference()
    for n, v in _fields(data):
        if n == 1:
            ref.name = _bytes(v).decode()
        elif n == 3:
            ref.overloads.append(_bytes(v).decode())
        elif n == 4:
            ref.value, ref.has_value = _constant(_bytes(v)), True
    return ref


def parse_checked(data: bytes) -> CheckedAst:
    """The expression and reference map of a serialized CheckedExpr (bare or in an Any)."""
    fields = list(_fields(data))
    if any(n == 1 and v == _CHECKED_EXPR.encode() for n, v in fields):
        inner = next((v for n, v in fields if n == 2), b"")
        fields = list(_fields(_bytes(inner)))
    expr: Expr | None = None
    references: dict[int, Reference] = {}
    for number, value in fields:
        if number == 4:
            expr = _expr(_bytes(value))
        elif number == 2:
            key, ref = 0, Reference()
            for n, v in _fields(_bytes(value)):
                if n == 1:
                    key = _signed(_int(v))
                elif n == 2:
                    ref = _reference(_bytes(v))
            references[key] = ref
    if expr is None:
        raise MalformedAst("no expression")
    return CheckedAst(expr, references)
