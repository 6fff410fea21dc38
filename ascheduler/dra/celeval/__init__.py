"""DRA device selectors evaluated in Python with their runtime cost metered as cel-go does.

cel-cpp (behind `ascheduler.dra.cel`) evaluates selectors fast but bounds them by a fixed
iteration budget of 10,000, which refuses selectors Kubernetes accepts, and has no cost
limit, so a selector that is costly at run time runs for as long as it takes. Kubernetes
bounds a selector by its runtime cost instead: cel-go meters every step, and the evaluation
fails with `operation cancelled: actual cost limit exceeded` once the cost passes
`resourceapi.CELSelectorExpressionMaxCost` (1,000,000).

This package evaluates the type-checked AST cel-cpp produced (so the checker's choice of
overload is known, not guessed) with closures built once per expression, and meters the
same cost as cel-go for the same evaluation; `tests/unit/dra/celcost/vectors` holds the
Kubernetes-computed costs it is checked against. What it does not model raises
`Unsupported` when the expression is metered, so a caller can fall back to cel-cpp.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from ascheduler.dra.allocator import EvalError
from ascheduler.dra.cel import Program, _not_bool
from ascheduler.dra.celeval.ast import MalformedAst, parse_checked
from ascheduler.dra.celeval.program import Compiler, Run, Unsupported
from ascheduler.dra.celeval.values import MESSAGE_COST, CostExceeded, Domains, Fail, type_name

__all__ = ["COST_LIMIT", "MeteredProgram", "Unsupported", "meter"]

#: resourceapi.CELSelectorExpressionMaxCost.
COST_LIMIT: Final = 1_000_000


class MeteredProgram:
    """A selector compiled for metered evaluation; `cost` is the last evaluation's."""

    __slots__ = ("_root", "cost")

    def __init__(self, root: Callable[[Run, dict[str, Any]], Any]) -> None:
        self._root = root
        self.cost = 0

    def evaluate(
        self,
        device: Mapping[str, Any],
        *,
        limit: int = COST_LIMIT,
        check: Callable[[], object] | None = None,
    ) -> bool:
        """The verdict for one device (`ascheduler.dra.cel.device_value`), or EvalError with
        Kubernetes' message. `check` is called every 100 comprehension iterations; what it
        raises ends the evaluation."""
        run = Run(limit, check)
        scope = {
            "device": {
                **device,
                "attributes": Domains(device["attributes"]),
                "capacity": Domains(device["capacity"]),
            }
        }
        try:
            result = self._root(run, scope)
        except Fail as exc:
            self.cost = run.cost
            if run.cost > limit:
                raise EvalError(MESSAGE_COST) from None
            raise EvalError(str(exc)) from None
        except CostExceeded as exc:
            self.cost = run.cost
            raise EvalError(str(exc)) from None
        self.cost = run.cost
        if run.cost > limit:
            raise EvalError(MESSAGE_COST)
        if type(result) is not bool:
            raise EvalError(_not_bool(type_name(result), result))
        return result


def meter(source: bytes | Program | Any) -> MeteredProgram:
    """Compile a selector for metered evaluation from cel-cpp's serialized checked
    expression, a `cel.Program`, or a compiled cel-expr-python expression."""
    if isinstance(source, Program):
        if source.error or source.compiled is None:
            raise Unsupported("the selector does not compile")
        source = source.compiled
    data = source if isinstance(source, bytes) else source.serialize()
    try:
        ast = parse_checked(data)
    except MalformedAst as exc:
        raise Unsupported(str(exc)) from None
    return MeteredProgram(Compiler(ast).expr(ast.expr))
