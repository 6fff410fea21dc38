"""Compiling a checked selector into Python closures that evaluate it and meter its cost.

Each AST node becomes one closure `(run, scope) -> value`, built once per expression; `run`
carries the running cost, the limit and the interrupt callback, `scope` the variables. The
cost each closure adds mirrors what cel-go's cost observer records for the node's plan step
(`interpreter/runtimecost.go`), which depends on how cel-go's planner shapes the node:

- constants, and list/map literals made only of constants (folded by `OptOptimize`), cost 0;
  `x in [constant, ...]` becomes a set test that costs only `x`;
- an attribute (an identifier, or any operand, followed by selects and indexes) costs 1, plus
  1 per qualifier applied, plus the cost of a computed index; a presence test (`has`) costs
  its qualifiers only, as Kubernetes disables the presence test's own cost;
- `&&`, `||` and `?:` cost nothing themselves, and a conditional's branch that is an
  attribute is resolved without its own 1;
- a call costs its arguments plus `functions.call_cost`; `or`/`orValue` cost nothing;
- a non-constant list costs 10, a map 30, plus their elements;
- a comprehension costs its range, then per iteration its condition and step, then its
  result; the accumulator's initial value is evaluated (and costs) when first read.

Errors are exceptions caught where cel-go absorbs error values; every argument of a call is
evaluated even after one fails, as cel-go does, so the cost agrees on every path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from ascheduler.dra.celeval.ast import CheckedAst, Expr, Reference, Uint
from ascheduler.dra.celeval.functions import FUNCTIONS, call_cost, constant_cost
from ascheduler.dra.celeval.values import (
    MESSAGE_COST,
    NO_OVERLOAD,
    CostExceeded,
    Domains,
    Fail,
    Optional,
    absent,
    key_text,
    list_index,
    map_find,
    map_get,
)

#: cel-go's InterruptCheckFrequency as Kubernetes sets it (celconfig.CheckFrequency).
CHECK_EVERY: Final = 100
LIST_CREATE: Final = 10
MAP_CREATE: Final = 30


class Unsupported(Exception):
    """The expression uses something this evaluator does not model."""


class Run:
    """One evaluation's state."""

    __slots__ = ("check", "cost", "limit", "steps")

    def __init__(self, limit: int, check: Callable[[], object] | None) -> None:
        self.cost = 0
        self.limit = limit
        self.check = check
        self.steps = 0


Scope = dict[str, Any]
Node = Callable[[Run, Scope], Any]


class _Lazy:
    """A comprehension's accumulator before it is first read (cel.bind's value)."""

    __slots__ = ("done", "error", "init", "scope", "value")

    def __init__(self, init: Node, scope: Scope) -> None:
        self.init, self.scope = init, scope
        self.done = False
        self.value: Any = None
        self.error: Fail | None = None

    def get(self, run: Run) -> Any:
        if not self.done:
            self.done = True
            try:
                self.value = self.init(run, self.scope)
            except Fail as exc:
                self.error = exc
        if self.error is not None:
            raise self.error
        return self.value


class _Broken:
    """An accumulator whose step failed: reading it fails."""

    __slots__ = ("error",)

    def __init__(self, error: Fail) -> None:
        self.error = error


_ERROR: Final = object()
_ATTRIBUTE_CALLS: Final = frozenset({"_[_]", "_?._", "_[?_]", "_?_:_"})


def _is_attribute(node: Expr) -> bool:
    if node.kind == "ident" or (node.kind == "select" and not node.test_only):
        return True
    return node.kind == "call" and node.operand is None and node.name in _ATTRIBUTE_CALLS


def _constant(node: Expr) -> tuple[bool, Any]:
    """(True, value) for a literal, or a list/map literal folded to a constant."""
    if node.kind == "const":
        return True, node.value
    if node.kind == "list" and not node.optional:
        items = [_constant(e) for e in node.args]
        if all(ok for ok, _ in items):
            return True, [v for _, v in items]
    if node.kind == "map" and not node.optional:
        out: dict[Any, Any] = {}
        for k, v in node.entries:
            kk, vv = _constant(k), _constant(v)
            if not (kk[0] and vv[0]) or type(kk[1]) not in (str, int, bool):
                return False, None
            out[kk[1]] = vv[1]
        return True, out
    return False, None


class Compiler:
    def __init__(self, ast: CheckedAst) -> None:
        self._refs = ast.references
        #: comprehension variables in scope: name -> "iter" or "accu".
        self._bound: list[tuple[str, str]] = []

    def _ref(self, node: Expr) -> Reference | None:
        return self._refs.get(node.id)

    def expr(self, node: Expr, base: bool = True) -> Node:
        """The closure for a node; `base` False leaves out an attribute's own cost of 1 (a
        conditional's branch)."""
        ok, value = _constant(node)
        if ok:
            if isinstance(value, bytes) or type(value) is Uint:
                raise Unsupported(f"{type(value).__name__} literal")
            return lambda run, scope: value
        if node.kind == "ident":
            return self._ident(node, base)
        if node.kind == "select":
            return self._select(node, base)
        if node.kind == "call":
            return self._call(node, base)
        if node.kind == "list":
            return self._list(node)
        if node.kind == "map":
            return self._map(node)
        if node.kind == "comprehension":
            return self._comprehension(node)
        raise Unsupported(f"{node.kind} expressions")

    # -- attributes -------------------------------------------------------------------------

    def _ident(self, node: Expr, base: bool) -> Node:
        ref = self._ref(node)
        if ref is not None and ref.has_value:
            value = ref.value
            return lambda run, scope: value
        name = ref.name if ref is not None and ref.name else node.name
        cost = 1 if base else 0
        for bound, role in reversed(self._bound):
            if bound == name:
                return _accu(name, cost) if role == "accu" else _var(name, cost)
        if name != "device":
            raise Unsupported(f"variable {name}")
        return _var(name, cost)

    def _operand(self, node: Expr, base: bool) -> Node:
        """An attribute's operand: part of the same attribute, or (any other expression) a
        relative attribute that costs 1 itself."""
        if _is_attribute(node):
            return self.expr(node, base)
        inner = self.expr(node)
        if not base:
            return inner

        def relative(run: Run, scope: Scope) -> Any:
            run.cost += 1
            return inner(run, scope)

        return relative

    def _select(self, node: Expr, base: bool) -> Node:
        assert node.operand is not None
        field = node.name
        if node.test_only:
            operand = self._operand(node.operand, False)

            def present(run: Run, scope: Scope) -> bool:
                target = operand(run, scope)
                run.cost += 1
                if type(target) is dict or type(target) is Domains:
                    return True if type(target) is Domains else field in target
                raise Fail(NO_OVERLOAD)

            return present
        operand = self._operand(node.operand, base)

        def select(run: Run, scope: Scope) -> Any:
            target = operand(run, scope)
            if type(target) is Optional:
                return _optional_step(run, target, field)
            run.cost += 1
            return _qualify(target, field)

        return select

    def _index(self, args: list[Expr], base: bool, optional: bool) -> Node:
        operand = self._operand(args[0], base)
        key = self.expr(args[1], False)

        if optional:

            def opt_index(run: Run, scope: Scope) -> Any:
                target = operand(run, scope)
                k = key(run, scope)
                if type(target) is Optional:
                    return _optional_step(run, target, k)
                return _optional_step(run, Optional(True, target), k)

            return opt_index

        def index(run: Run, scope: Scope) -> Any:
            target = operand(run, scope)
            k = key(run, scope)
            if type(target) is Optional:
                return _optional_step(run, target, k)
            run.cost += 1
            return _qualify(target, k)

        return index

    # -- calls ------------------------------------------------------------------------------

    def _call(self, node: Expr, base: bool) -> Node:
        name = node.name
        args = ([node.operand] if node.operand is not None else []) + node.args
        if name == "_[_]":
            return self._index(args, base, False)
        if name in ("_?._", "_[?_]"):
            return self._index(args, base, True)
        if name == "_&&_" or name == "_||_":
            return _logical([self.expr(a) for a in args], name == "_&&_")
        if name == "_?_:_":
            cond = self.expr(args[0])
            yes, no = self.expr(args[1], False), self.expr(args[2], False)
            return _conditional(cond, yes, no)
        if name in ("orValue", "or"):
            return _optional_or(self.expr(args[0]), self.expr(args[1]), name == "or")
        ref = self._ref(node)
        overloads = ref.overloads if ref is not None else []
        if name == "@in" and len(args) == 2:
            ok, items = _constant(args[1])
            if ok and isinstance(items, list) and _set_member(items):
                return _set_membership(self.expr(args[0]), items)
        fn = FUNCTIONS.get(name)
        if fn is None or not fn.overloads.intersection(overloads):
            raise Unsupported(f"function {name} ({', '.join(overloads)})")
        if name in ("string", "int", "double") and _constant(args[0])[0]:
            return self._folded(name, fn.impl, args[0])
        overload = overloads[0] if len(overloads) == 1 else ""
        compiled = [self.expr(a) for a in args]
        if name == "@not_strictly_false":
            return _not_strictly_false(compiled[0])
        if name == "_==_" or name == "_!=_":
            return _equality(compiled, overload, name == "_!=_")
        return _generic(name, overload, fn.impl, compiled)

    def _folded(self, name: str, impl: Callable[..., Any], arg: Expr) -> Node:
        """A type conversion of a constant, folded by cel-go's optimizer (cost 0) unless it
        fails."""
        value = _constant(arg)[1]
        try:
            result = impl(value)
        except Fail as exc:
            error = exc

            def failing(run: Run, scope: Scope) -> Any:
                run.cost += 1
                raise error

            return failing
        return lambda run, scope: result

    # -- literals and comprehensions --------------------------------------------------------

    def _list(self, node: Expr) -> Node:
        items = [self.expr(e) for e in node.args]
        optional = set(node.optional)

        def make(run: Run, scope: Scope) -> Any:
            out, error = _evaluate_all(items, run, scope)
            run.cost += LIST_CREATE
            if error is not None:
                raise error
            if optional:
                return [
                    v.value if i in optional else v
                    for i, v in enumerate(out)
                    if i not in optional or v.present
                ]
            return out

        return make

    def _map(self, node: Expr) -> Node:
        if node.optional:
            raise Unsupported("optional map entries")
        parts = [(self.expr(k), self.expr(v)) for k, v in node.entries]

        def make(run: Run, scope: Scope) -> Any:
            out: dict[Any, Any] = {}
            error: Fail | None = None
            for k, v in parts:
                try:
                    key = k(run, scope)
                    value = v(run, scope)
                except Fail as exc:
                    error = error or exc
                    continue
                if type(key) not in (str, int, bool):
                    error = error or Fail(f"unsupported key type: {key_text(key)}")
                elif key in out:
                    error = error or Fail(f"Failed with repeated key: {key_text(key)}")
                out[key] = value
            run.cost += MAP_CREATE
            if error is not None:
                raise error
            return out

        return make

    def _comprehension(self, node: Expr) -> Node:
        if node.name2:
            raise Unsupported("two-variable comprehensions")
        assert node.operand is not None
        iter_range = self.expr(node.operand)
        init = self.expr(node.args[0])
        self._bound.append((node.accu, "accu"))
        self._bound.append((node.name, "iter"))
        cond = self.expr(node.args[1])
        step = self.expr(node.args[2])
        self._bound.pop()
        result = self.expr(node.args[3])
        self._bound.pop()
        return _fold(node.name, node.accu, iter_range, init, cond, step, result)


def _var(name: str, cost: int) -> Node:
    if cost:

        def var(run: Run, scope: Scope) -> Any:
            run.cost += 1
            return scope[name]

        return var
    return lambda run, scope: scope[name]


def _accu(name: str, cost: int) -> Node:
    def accu(run: Run, scope: Scope) -> Any:
        run.cost += cost
        value = scope[name]
        kind = type(value)
        if kind is _Lazy:
            return value.get(run)
        if kind is _Broken:
            raise value.error
        return value

    return accu


def _qualify(target: Any, key: Any) -> Any:
    kind = type(target)
    if kind is dict or kind is Domains:
        return map_get(target, key)
    if kind is list:
        return list_index(target, key)
    raise Fail(NO_OVERLOAD)


def _optional_step(run: Run, target: Optional, key: Any) -> Optional:
    """A qualifier applied to an optional: none stays none; a missing entry gives none
    (and, not being observed by cel-go, costs nothing)."""
    if not target.present:
        return target
    value = target.value
    kind = type(value)
    if kind is dict or kind is Domains:
        found = map_find(value, key)
        if absent(found):
            return Optional(False)
        run.cost += 1
        return Optional(True, found)
    if kind is list:
        if type(key) is int and 0 <= key < len(value):
            run.cost += 1
            return Optional(True, value[key])
        return Optional(False)
    raise Fail(NO_OVERLOAD)


def _evaluate_all(items: list[Node], run: Run, scope: Scope) -> tuple[list[Any], Fail | None]:
    out: list[Any] = []
    error: Fail | None = None
    for item in items:
        try:
            out.append(item(run, scope))
        except Fail as exc:
            error = error or exc
            out.append(_ERROR)
    return out, error


def _generic(name: str, overload: str, impl: Callable[..., Any], args: list[Node]) -> Node:
    fixed = constant_cost(name, overload)
    if len(args) == 1 and fixed:
        (a,) = args

        def unary(run: Run, scope: Scope) -> Any:
            try:
                value = a(run, scope)
            finally:
                run.cost += 1
            return impl(value)

        return unary
    if len(args) == 2 and fixed:
        a, b = args

        def binary(run: Run, scope: Scope) -> Any:
            try:
                x = a(run, scope)
            except Fail:
                _evaluate_all([b], run, scope)
                run.cost += 1
                raise
            y = b(run, scope)
            run.cost += 1
            return impl(x, y)

        return binary

    def call(run: Run, scope: Scope) -> Any:
        values, error = _evaluate_all(args, run, scope)
        if error is not None:
            run.cost += call_cost(name, overload, values, _ERROR)
            raise error
        try:
            result = impl(*values)
        except Fail:
            run.cost += call_cost(name, overload, values, _ERROR)
            raise
        run.cost += call_cost(name, overload, values, result)
        if run.cost > run.limit:
            raise CostExceeded(MESSAGE_COST)
        return result

    return call


def _equality(args: list[Node], overload: str, negate: bool) -> Node:
    from ascheduler.dra.celeval.values import equal

    a, b = args
    name = "_!=_" if negate else "_==_"

    def eq(run: Run, scope: Scope) -> Any:
        values, error = _evaluate_all([a, b], run, scope)
        run.cost += call_cost(name, overload, values, None)
        if error is not None:
            raise error
        return equal(values[0], values[1]) is not negate

    return eq


def _not_strictly_false(arg: Node) -> Node:
    """A comprehension's loop condition: an error does not stop the loop."""

    def not_strictly_false(run: Run, scope: Scope) -> bool:
        run.cost += 1
        try:
            return arg(run, scope) is not False
        except Fail:
            return True

    return not_strictly_false


def _logical(terms: list[Node], conjunction: bool) -> Node:
    stop = not conjunction

    def logical(run: Run, scope: Scope) -> Any:
        error: Fail | None = None
        for term in terms:
            try:
                value = term(run, scope)
            except Fail as exc:
                error = error or exc
                continue
            if value is stop:
                return stop
            if type(value) is not bool:
                error = error or Fail(NO_OVERLOAD)
        if error is not None:
            raise error
        return not stop

    return logical


def _conditional(cond: Node, yes: Node, no: Node) -> Node:
    def conditional(run: Run, scope: Scope) -> Any:
        c = cond(run, scope)
        if c is True:
            return yes(run, scope)
        if c is False:
            return no(run, scope)
        raise Fail(NO_OVERLOAD)

    return conditional


def _optional_or(target: Node, other: Node, both_optional: bool) -> Node:
    def optional_or(run: Run, scope: Scope) -> Any:
        value = target(run, scope)
        if type(value) is not Optional:
            raise Fail(NO_OVERLOAD)
        if value.present:
            return value if both_optional else value.value
        return other(run, scope)

    return optional_or


def _set_member(items: list[Any]) -> bool:
    return bool(items) and all(type(v) in (str, int, bool, float) for v in items)


def _set_membership(item: Node, items: list[Any]) -> Node:
    from ascheduler.dra.celeval.values import equal

    def member(run: Run, scope: Scope) -> bool:
        value = item(run, scope)
        return any(equal(value, v) for v in items)

    return member


def _fold(
    var: str, accu: str, iter_range: Node, init: Node, cond: Node, step: Node, result: Node
) -> Node:
    def fold(run: Run, scope: Scope) -> Any:
        items = iter_range(run, scope)
        kind = type(items)
        if kind is dict or kind is Domains:
            items = list(items)
        elif kind is not list:
            raise Fail(f"got '{kind.__name__}', expected iterable type")
        inner = dict(scope)
        inner[accu] = _Lazy(init, scope)
        for item in items:
            inner[var] = item
            try:
                go = cond(run, inner)
            except Fail:
                go = True
            if go is False:
                break
            try:
                inner[accu] = step(run, inner)
            except Fail as exc:
                inner[accu] = _Broken(exc)
            run.steps += 1
            if run.cost > run.limit:
                raise CostExceeded(MESSAGE_COST)
            if run.check is not None and run.steps % CHECK_EVERY == 0:
                run.check()
        if var in scope:
            inner[var] = scope[var]
        else:
            inner.pop(var, None)
        return result(run, inner)

    return fold
