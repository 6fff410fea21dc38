"""The example plugins are written as an outside author's must be: against the plugin API
(`ascheduler.framework`) and the records (`ascheduler.model`) only, never the scheduler's
internals. Read from their source, so an import added anywhere in them (inside a function
too) is seen."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
MODULES = sorted(p for p in EXAMPLES.glob("*/*/*.py") if "egg-info" not in str(p))
ALLOWED = ("ascheduler.framework", "ascheduler.model")


def ascheduler_imports(path: Path) -> list[str]:
    """Every module of ascheduler that `path` imports (`from ascheduler import x` as
    `ascheduler.x`)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "ascheduler":
                names.extend(f"ascheduler.{alias.name}" for alias in node.names)
            else:
                names.append(node.module)
    return [n for n in names if n == "ascheduler" or n.startswith("ascheduler.")]


def test_the_examples_are_found() -> None:
    found = {p.relative_to(EXAMPLES).as_posix() for p in MODULES}
    assert {
        "nodecost/nodecost/__init__.py",
        "platform/spotavoidance/__init__.py",
        "platform/teamquota/__init__.py",
    } <= found


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(EXAMPLES).as_posix())
def test_examples_import_only_the_plugin_api(path: Path) -> None:
    imported = ascheduler_imports(path)
    assert imported, "an example plugin is written against ascheduler.framework"
    assert [n for n in imported if n not in ALLOWED] == []


@pytest.mark.parametrize(
    ("source", "imported"),
    [
        pytest.param("from ascheduler.framework import Handle", ["ascheduler.framework"]),
        pytest.param("import ascheduler.kube", ["ascheduler.kube"]),
        pytest.param("from ascheduler import locks", ["ascheduler.locks"]),
        pytest.param(
            "def f():\n    from ascheduler.framework.runtime import Framework",
            ["ascheduler.framework.runtime"],
            id="inside-a-function",
        ),
        pytest.param("import numpy\nfrom . import x", [], id="not-ascheduler"),
    ],
)
def test_imports_are_read(tmp_path: Path, source: str, imported: list[str]) -> None:
    path = tmp_path / "m.py"
    path.write_text(source)
    assert ascheduler_imports(path) == imported
