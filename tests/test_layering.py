"""The package's layers depend one way, and no unit reaches into another's private state.

A unit is a subpackage of `hlo_dedup` (`ir`, `text`, `passes`, ...) or a top-level module
(`cli`, `logs`, ...); `hlo_dedup/__init__.py` is the unit `__init__`. Imports are read
from the source (lazy imports inside functions included), so a cycle hidden behind a
function-level import is still found.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "hlo_dedup"

#: The core, bottom to top: a unit may import only units of its own layer or below.
CORE_LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"syntax", "logs", "plain"}),
    frozenset({"ir"}),
    frozenset({"text", "analysis"}),
    frozenset({"passes"}),
)


def _unit(module: str) -> str | None:
    """`hlo_dedup.ir.shape` -> `ir`; None for modules outside the package."""
    parts = module.split(".")
    if parts[0] != "hlo_dedup":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Fully qualified modules `path` imports (relative imports resolved)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)  # `from . import x`
    return found


def _graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        unit = _unit(_module_name(path))
        assert unit is not None
        targets = edges.setdefault(unit, set())
        for imported in _imports(path):
            other = _unit(imported)
            if other is not None and other != unit and (PACKAGE / other).exists() | (PACKAGE / f"{other}.py").exists():
                targets.add(other)
    return edges


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        state[node] = 2
        stack.pop()
        return None

    for start in sorted(edges):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def test_no_import_cycle_between_units() -> None:
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


@pytest.mark.parametrize("layer", range(len(CORE_LAYERS)))
def test_core_layers_import_downwards(layer: int) -> None:
    allowed = frozenset().union(*CORE_LAYERS[: layer + 1])
    edges = _graph()
    for unit in CORE_LAYERS[layer]:
        upward = edges.get(unit, set()) - allowed
        assert not upward, f"{unit} imports {sorted(upward)}, which sit above it"


def _private_names(paths: list[Path]) -> set[str]:
    """Private names a unit defines: `self._x` attributes, `_x` functions, classes and globals."""
    names: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
                names.add(node.value)  # __slots__ entries
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def test_no_private_access_across_units() -> None:
    by_unit: dict[str, list[Path]] = {}
    for path in PACKAGE.rglob("*.py"):
        by_unit.setdefault(_unit(_module_name(path)) or "", []).append(path)
    private = {unit: _private_names(paths) for unit, paths in by_unit.items()}
    violations = []
    for unit, paths in by_unit.items():
        foreign = set().union(*(names for other, names in private.items() if other != unit)) - private[unit]
        for path in paths:
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not (isinstance(node, ast.Attribute) and node.attr in foreign):
                    continue
                if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                    continue
                violations.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)}")
    assert not violations, "private state used across units:\n" + "\n".join(violations)
