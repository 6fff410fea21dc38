"""The functions a metered selector may call: their behaviour and their cost.

Each entry is keyed by CEL function name and lists the overload ids (as cel-cpp's checker
names them, which are cel-go's names) it implements; a call whose candidate overloads are
none of these is refused when the expression is metered. Behaviour dispatches on the run-time
values, since a `dyn` argument leaves several candidates.

Cost follows cel-go's `costCall` with Kubernetes' estimator in front of it (strict cost, as
every Kubernetes environment runs): the estimator matches by function name first
(`k8s.io/apiserver/pkg/cel/library/cost.go`), cel-go's defaults then match by overload id,
and an overload id is only known to cel-go when the checker left exactly one candidate; any
other call costs 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from cel_expr_python import cel  # type: ignore[import-untyped]

from ascheduler.dra import cel as k8s
from ascheduler.dra.celeval.ast import Uint
from ascheduler.dra.celeval.values import (
    NO_OVERLOAD,
    Domains,
    Fail,
    Optional,
    ceil_tenth,
    checked_int,
    equal,
    map_contains,
    size,
    traversal,
)

Impl = Callable[..., Any]
Cost = Callable[[str, list[Any], Any], int]


@dataclass(frozen=True, slots=True)
class Function:
    impl: Impl
    overloads: frozenset[str]


def _ints(a: Any, b: Any) -> bool:
    return type(a) is int and type(b) is int


def _num(v: Any) -> bool:
    kind = type(v)
    return kind is int or kind is float or kind is Uint


def _add(a: Any, b: Any) -> Any:
    if _ints(a, b):
        return checked_int(a + b)
    ka, kb = type(a), type(b)
    if ka is float and kb is float:
        return a + b
    if ka is str and kb is str:
        return a + b
    if ka is list and kb is list:
        return a + b
    raise Fail(NO_OVERLOAD)


def _sub(a: Any, b: Any) -> Any:
    if _ints(a, b):
        return checked_int(a - b)
    if type(a) is float and type(b) is float:
        return a - b
    raise Fail(NO_OVERLOAD)


def _mul(a: Any, b: Any) -> Any:
    if _ints(a, b):
        return checked_int(a * b)
    if type(a) is float and type(b) is float:
        return a * b
    raise Fail(NO_OVERLOAD)


def _div(a: Any, b: Any) -> Any:
    if _ints(a, b):
        if b == 0:
            raise Fail("division by zero")
        q = abs(a) // abs(b)
        return checked_int(q if (a < 0) == (b < 0) else -q)
    if type(a) is float and type(b) is float:
        if b == 0:
            return math.copysign(math.inf, a) if a else math.nan
        return a / b
    raise Fail(NO_OVERLOAD)


def _mod(a: Any, b: Any) -> Any:
    if _ints(a, b):
        if b == 0:
            raise Fail("modulus by zero")
        r = abs(a) % abs(b)
        return r if a >= 0 else -r
    raise Fail(NO_OVERLOAD)


def _neg(a: Any) -> Any:
    if type(a) is int:
        return checked_int(-a)
    if type(a) is float:
        return -a
    raise Fail(NO_OVERLOAD)


def _order(a: Any, b: Any) -> int:
    if _num(a) and _num(b):
        return int((a > b) - (a < b))
    ka = type(a)
    if ka is type(b) and (ka is str or ka is bool):
        return int((a > b) - (a < b))
    raise Fail(NO_OVERLOAD)


def _not(a: Any) -> bool:
    if type(a) is bool:
        return not a
    raise Fail(NO_OVERLOAD)


def _size(a: Any) -> int:
    kind = type(a)
    if kind is str or kind is list or kind is dict or kind is Domains:
        return len(a)
    raise Fail(NO_OVERLOAD)


def _in(item: Any, container: Any) -> bool:
    kind = type(container)
    if kind is list:
        return any(equal(item, v) for v in container)
    if kind is dict or kind is Domains:
        return map_contains(container, item)
    raise Fail(NO_OVERLOAD)


def _strs(*values: Any) -> None:
    for v in values:
        if type(v) is not str:
            raise Fail(NO_OVERLOAD)


def _starts(s: Any, p: Any) -> bool:
    _strs(s, p)
    return bool(s.startswith(p))


def _ends(s: Any, p: Any) -> bool:
    _strs(s, p)
    return bool(s.endswith(p))


def _contains(s: Any, p: Any) -> bool:
    _strs(s, p)
    return p in s


def _matches(s: Any, p: Any) -> bool:
    """RE2 semantics (linear time, RE2 syntax) from cel-cpp itself: Python's backtracking
    `re` would take exponential time on patterns RE2 runs in linear time."""
    _strs(s, p)
    result = _MATCHES.eval(_REGEX_ENV.Activation({"s": s, "p": p}))
    if result.type() == cel.Type.BOOL:
        return bool(result.value())
    raise Fail(k8s._kubernetes_words(str(result.value())))


_REGEX_ENV: Final = cel.NewEnv(variables={"s": cel.Type.STRING, "p": cel.Type.STRING})
_MATCHES: Final = _REGEX_ENV.compile("s.matches(p)")


def _char_at(s: Any, i: Any) -> str:
    _strs(s)
    if type(i) is not int:
        raise Fail(NO_OVERLOAD)
    if i < 0 or i > len(s):
        raise Fail(f"index out of range: {i}")
    return str(s[i : i + 1])


def _index_of(s: Any, sub: Any, start: Any = 0) -> int:
    _strs(s, sub)
    if type(start) is not int:
        raise Fail(NO_OVERLOAD)
    if start < 0 or start > len(s):
        raise Fail(f"index out of range: {start}")
    return int(s.find(sub, start))


def _last_index_of(s: Any, sub: Any, *end: Any) -> int:
    _strs(s, sub)
    if end:
        if type(end[0]) is not int:
            raise Fail(NO_OVERLOAD)
        if end[0] < 0 or end[0] >= len(s):
            raise Fail(f"index out of range: {end[0]}")
        return int(s.rfind(sub, 0, end[0] + len(sub)))
    return int(s.rfind(sub))


def _lower(s: Any) -> str:
    _strs(s)
    return "".join(c.lower() if "A" <= c <= "Z" else c for c in s)


def _upper(s: Any) -> str:
    _strs(s)
    return "".join(c.upper() if "a" <= c <= "z" else c for c in s)


def _replace(s: Any, old: Any, new: Any, n: Any = -1) -> str:
    _strs(s, old, new)
    if type(n) is not int:
        raise Fail(NO_OVERLOAD)
    return str(s.replace(old, new, n if n >= 0 else -1))


def _split(s: Any, sep: Any, n: Any = -1) -> list[str]:
    _strs(s, sep)
    if type(n) is not int:
        raise Fail(NO_OVERLOAD)
    if n == 0:
        return []
    if sep == "":
        chars = list(s)
        return chars if n < 0 or n >= len(chars) else [*chars[: n - 1], "".join(chars[n - 1 :])]
    return list(s.split(sep, n - 1 if n > 0 else -1))


def _substring(s: Any, start: Any, *end: Any) -> str:
    _strs(s)
    stop = end[0] if end else len(s)
    if type(start) is not int or type(stop) is not int:
        raise Fail(NO_OVERLOAD)
    if start < 0 or start > len(s):
        raise Fail(f"index out of range: {start}")
    if stop < 0 or stop > len(s):
        raise Fail(f"index out of range: {stop}")
    if start > stop:
        raise Fail(f"invalid substring range. start: {start}, end: {stop}")
    return str(s[start:stop])


_SPACE: Final = (
    "".join(
        chr(c)
        for c in (*range(9, 14), 32, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029)
    )
    + "\u202f\u205f\u3000"
)


def _trim(s: Any) -> str:
    _strs(s)
    return str(s.strip(_SPACE))


def _join(items: Any, sep: Any = "") -> str:
    _strs(sep)
    if type(items) is not list:
        raise Fail(NO_OVERLOAD)
    _strs(*items)
    return str(sep.join(items))


def _to_string(v: Any) -> str:
    kind = type(v)
    if kind is str:
        return str(v)
    if kind is int:
        return str(v)
    if kind is bool:
        return "true" if v else "false"
    raise Fail(NO_OVERLOAD)


def _to_int(v: Any) -> int:
    kind = type(v)
    if kind is int:
        return int(v)
    if kind is str:
        try:
            return checked_int(int(v, 10))
        except ValueError:
            raise Fail(f"cannot convert string '{v}' to int") from None
    if kind is float:
        if math.isnan(v) or not (-(2.0**63) < v < 2.0**63):
            raise Fail("integer overflow")
        return int(v)
    raise Fail(NO_OVERLOAD)


def _to_double(v: Any) -> float:
    kind = type(v)
    if kind is float:
        return float(v)
    if kind is int:
        return float(v)
    raise Fail(NO_OVERLOAD)


def _k8s(fn: Callable[..., Any]) -> Impl:
    """A Kubernetes library function from cel.py, its ValueError as an evaluation error."""

    def call(*args: Any) -> Any:
        for a in args:
            if type(a) is not bytes and type(a) is not str and type(a) is not int:
                raise Fail(NO_OVERLOAD)
        try:
            return fn(*args)
        except ValueError as exc:
            raise Fail(str(exc)) from None

    return call


def _opt_value(o: Any) -> Any:
    if type(o) is not Optional:
        raise Fail(NO_OVERLOAD)
    if not o.present:
        raise Fail("optional.none() dereference")
    return o.value


def _has_value(o: Any) -> bool:
    if type(o) is not Optional:
        raise Fail(NO_OVERLOAD)
    return o.present


def _fn(impl: Impl, *overloads: str) -> Function:
    return Function(impl, frozenset(overloads))


_Q = k8s
_ORDERED: Final = ("int64", "double", "string", "bool", "int64_double", "double_int64")
FUNCTIONS: Final[dict[str, Function]] = {
    "_+_": _fn(_add, "add_int64", "add_double", "add_string", "add_list"),
    "_-_": _fn(_sub, "subtract_int64", "subtract_double"),
    "_*_": _fn(_mul, "multiply_int64", "multiply_double"),
    "_/_": _fn(_div, "divide_int64", "divide_double"),
    "_%_": _fn(_mod, "modulo_int64"),
    "-_": _fn(_neg, "negate_int64", "negate_double"),
    "_<_": _fn(lambda a, b: _order(a, b) < 0, *(f"less_{t}" for t in _ORDERED)),
    "_<=_": _fn(lambda a, b: _order(a, b) <= 0, *(f"less_equals_{t}" for t in _ORDERED)),
    "_>_": _fn(lambda a, b: _order(a, b) > 0, *(f"greater_{t}" for t in _ORDERED)),
    "_>=_": _fn(lambda a, b: _order(a, b) >= 0, *(f"greater_equals_{t}" for t in _ORDERED)),
    "!_": _fn(_not, "logical_not"),
    "_==_": _fn(equal, "equals"),
    "_!=_": _fn(lambda a, b: not equal(a, b), "not_equals"),
    "@not_strictly_false": _fn(lambda a: a is not False, "not_strictly_false"),
    "size": _fn(
        _size, "size_string", "string_size", "size_list", "list_size", "size_map", "map_size"
    ),
    "@in": _fn(_in, "in_list", "in_map"),
    "startsWith": _fn(_starts, "starts_with_string"),
    "endsWith": _fn(_ends, "ends_with_string"),
    "contains": _fn(_contains, "contains_string"),
    "matches": _fn(_matches, "matches", "matches_string"),
    "charAt": _fn(_char_at, "string_char_at_int"),
    "indexOf": _fn(_index_of, "string_index_of_string", "string_index_of_string_int"),
    "lastIndexOf": _fn(
        _last_index_of, "string_last_index_of_string", "string_last_index_of_string_int"
    ),
    "lowerAscii": _fn(_lower, "string_lower_ascii"),
    "upperAscii": _fn(_upper, "string_upper_ascii"),
    "replace": _fn(_replace, "string_replace_string_string", "string_replace_string_string_int"),
    "split": _fn(_split, "string_split_string", "string_split_string_int"),
    "substring": _fn(_substring, "string_substring_int", "string_substring_int_int"),
    "trim": _fn(_trim, "string_trim"),
    "join": _fn(_join, "list_join", "list_join_string"),
    "string": _fn(_to_string, "string_to_string", "int64_to_string", "bool_to_string"),
    "int": _fn(_to_int, "int64_to_int64", "string_to_int64", "double_to_int64"),
    "double": _fn(_to_double, "double_to_double", "int64_to_double"),
    "optional.of": _fn(lambda v: Optional(True, v), "optional_of"),
    "optional.none": _fn(lambda: Optional(False), "optional_none"),
    "value": _fn(_opt_value, "optional_value"),
    "hasValue": _fn(_has_value, "optional_hasValue"),
    "quantity": _fn(_k8s(_Q._quantity), "k8s_quantity_string"),
    "isQuantity": _fn(_k8s(_Q._is_quantity), "k8s_isQuantity_string"),
    "semver": _fn(_k8s(_Q._semver), "k8s_semver_string"),
    "isSemver": _fn(_k8s(_Q._is_semver), "k8s_isSemver_string"),
    "compareTo": _fn(_k8s(_Q._compare), "k8s_compareTo_bytes_bytes"),
    "isGreaterThan": _fn(_k8s(lambda a, b: _Q._compare(a, b) > 0), "k8s_isGreaterThan_bytes_bytes"),
    "isLessThan": _fn(_k8s(lambda a, b: _Q._compare(a, b) < 0), "k8s_isLessThan_bytes_bytes"),
    "major": _fn(_k8s(lambda v: _Q._v(v).major), "k8s_major_bytes"),
    "minor": _fn(_k8s(lambda v: _Q._v(v).minor), "k8s_minor_bytes"),
    "patch": _fn(_k8s(lambda v: _Q._v(v).patch), "k8s_patch_bytes"),
    "sign": _fn(_k8s(lambda q: (_Q._q(q) > 0) - (_Q._q(q) < 0)), "k8s_sign_bytes"),
    "isInteger": _fn(_k8s(lambda q: _Q._q(q).denominator == 1), "k8s_isInteger_bytes"),
    "asInteger": _fn(_k8s(_Q._as_integer), "k8s_asInteger_bytes"),
    "asApproximateFloat": _fn(_k8s(lambda q: float(_Q._q(q))), "k8s_asApproximateFloat_bytes"),
    "add": _fn(_k8s(_Q._add), "k8s_add_bytes_bytes", "k8s_add_bytes_int"),
    "sub": _fn(_k8s(_Q._sub), "k8s_sub_bytes_bytes", "k8s_sub_bytes_int"),
}


# -- cost -----------------------------------------------------------------------------------

_UNIT_BY_NAME: Final = frozenset(
    {
        "sign", "asInteger", "isInteger", "asApproximateFloat", "isGreaterThan",
        "isLessThan", "compareTo", "add", "sub", "major", "minor", "patch",
    }
)  # fmt: skip
_TRAVERSE_BY_NAME: Final = frozenset(
    {
        "lowerAscii",
        "upperAscii",
        "substring",
        "trim",
        "quantity",
        "isQuantity",
        "semver",
        "isSemver",
    }
)
_PREFIX_BY_ID: Final = frozenset({"starts_with_string", "ends_with_string"})
_MIN_BY_ID: Final = frozenset(
    {
        "less_string", "greater_string", "less_equals_string", "greater_equals_string",
        "equals", "not_equals",
    }
)  # fmt: skip


def _tagged(v: Any) -> bool:
    return type(v) is bytes


def call_cost(function: str, overload: str, args: list[Any], result: Any) -> int:
    """What one call adds to the running cost (`overload` is "" unless it was the checker's
    only candidate)."""
    if function in _UNIT_BY_NAME:
        return 1
    if function in _TRAVERSE_BY_NAME:
        return ceil_tenth(size(args[0]))
    if function == "indexOf" or function == "lastIndexOf":
        return traversal(args[0])
    if function == "replace" or function == "split":
        return math.ceil(size(args[0]) * 2 * 0.1)
    if function == "join":
        return math.ceil(size(result) * 2 * 0.1)
    if function == "_==_" and _tagged(args[0]):
        return 1
    if overload in _PREFIX_BY_ID:
        return ceil_tenth(size(args[0]))
    if overload in _MIN_BY_ID:
        return ceil_tenth(min(size(args[0]), size(args[1])))
    if overload == "in_list":
        return size(args[1])
    if overload == "add_string":
        return ceil_tenth(size(args[0]) + size(args[1]))
    if overload == "matches_string":
        text = math.ceil((1.0 + size(args[0])) * 0.1)
        return text * math.ceil(size(args[1]) * 0.25)
    if overload == "contains_string":
        return ceil_tenth(size(args[0])) * ceil_tenth(size(args[1]))
    return 1


def constant_cost(function: str, overload: str) -> bool:
    """Whether a call costs 1 whatever its arguments."""
    if function in _UNIT_BY_NAME:
        return True
    if function in _TRAVERSE_BY_NAME or function in ("indexOf", "lastIndexOf", "replace"):
        return False
    if function in ("split", "join", "_==_"):
        return False
    return overload not in (
        _PREFIX_BY_ID | _MIN_BY_ID | {"in_list", "add_string", "matches_string", "contains_string"}
    )
