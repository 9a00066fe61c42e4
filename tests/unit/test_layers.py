"""The layers of docs/design.md, enforced: every import in src/telo points down, and no modules import each other
in a circle — module-level, function-level and ``TYPE_CHECKING`` imports alike (in the manner of trio's layering
test). A new module lands in the layer of its package; a module that needs something from above is in the wrong
room (move the shared part down, or have the caller pass it in, as the runtime is handed its kinds).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

# Lowest first. A module belongs to the longest prefix it starts with; modules of one layer may import each other
# (but not in a cycle), and any layer below.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("telo.error_codes", "telo.errors", "telo.clock", "telo.faults"),
    ("telo.values",),
    ("telo.paths", "telo.targets"),
    ("telo.journal", "telo.cel"),
    ("telo.specs",),
    ("telo.manifest", "telo.analysis", "telo.step_refs", "telo.transaction_checks"),
    ("telo.engine",),
    ("telo.runtime",),
    ("telo.durable",),
    ("telo.kinds", "telo.observability"),
    ("telo.operations",),
    ("telo.api", "telo.builder", "telo.testing", "telo"),
    ("telo.server", "telo.cli", "telo.__main__"),
)

def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted((SRC / "telo").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """Every telo module ``module`` imports, wherever the import statement is, with its line."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            # `from pkg import mod` imports the submodule; `from mod import name` the module itself.
            names = [f"{source}.{a.name}" if f"{source}.{a.name}" in MODULES else source for a in node.names]
        else:
            continue
        for name in names:
            target = _resolve(name)
            if target is not None and target != module:
                yield target, node.lineno


def _layer(module: str) -> int:
    best, rank = -1, -1
    for i, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            # "telo" names the package's own __init__ only: a new top-level module must be given its row.
            within = module.startswith(prefix + ".") and prefix != "telo"
            if (module == prefix or within) and len(prefix) > best:
                best, rank = len(prefix), i
    return rank


EDGES: dict[str, dict[str, int]] = {m: dict(_imports(m, p)) for m, p in MODULES.items()}


def test_every_module_has_a_layer() -> None:
    assert [m for m in MODULES if _layer(m) < 0] == []


def test_imports_point_down() -> None:
    upward = [f"{MODULES[a].relative_to(SRC)}:{line} imports {b} (layer {_layer(b)} is above {_layer(a)})"
              for a, targets in EDGES.items() for b, line in targets.items() if _layer(b) > _layer(a)]
    assert upward == []


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in EDGES[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in MODULES:
        if module not in index:
            visit(module)
    return sorted(found)


def test_no_import_cycles() -> None:
    assert _cycles() == []


@pytest.mark.parametrize("source", ["import telo.kinds.run\n", "from telo.kinds import run\n",
                                    "from ..kinds import run\n", "def f():\n    from telo.kinds.run import Sequence\n"])
def test_the_scan_sees_every_import_form(source: str, tmp_path: Path) -> None:
    """The checks above are only as good as the scan: an upward import in any form is seen."""
    path = tmp_path / "engine_mod.py"
    path.write_text(source)
    assert "telo.kinds.run" in dict(_imports("telo.engine.mod", path))
