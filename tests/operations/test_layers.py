"""The operations layer's place in the layer order (docs: issue 13's layout): operations may import the
backend, the kinds, the runtime and below, never the facade or the front ends; the kinds, the backend and
the builder never import operations or anything above; CLI command modules never import ``telo.cli.main``.
Every import counts — module level, function level and ``TYPE_CHECKING`` alike."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "telo"


def imported(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def modules(*parts: str) -> list[Path]:
    found: list[Path] = []
    for part in parts:
        target = SRC / part
        found.extend(sorted(target.rglob("*.py")) if target.is_dir() else [target])
    return found


FORBIDDEN = [
    (("operations",), ("telo.api", "telo.cli", "telo.server", "telo.testing")),
    (("kinds", "durable", "journal", "runtime", "engine", "specs", "manifest", "builder.py"),
     ("telo.operations", "telo.api", "telo.cli", "telo.server", "telo.testing")),
    (("api",), ("telo.cli", "telo.server")),
]


@pytest.mark.parametrize(("where", "above"), FORBIDDEN, ids=lambda v: ",".join(v) if isinstance(v, tuple) else v)
def test_no_module_imports_a_layer_above_it(where: tuple[str, ...], above: tuple[str, ...]) -> None:
    bad = [(str(p.relative_to(SRC)), name) for p in modules(*where) for name in sorted(imported(p))
           if any(name == a or name.startswith(a + ".") for a in above)]
    assert bad == []


def test_cli_command_modules_never_import_main() -> None:
    bad = [p.name for p in modules("cli") if p.name != "main.py" and p.name != "__init__.py"
           and ({"telo.cli.main"} & imported(p) or "telo.cli.main" in {n.rsplit(".", 1)[0] for n in imported(p)})]
    assert bad == []


def test_cli_and_api_modules_stay_under_400_lines() -> None:
    long = [(str(p.relative_to(SRC)), n) for p in modules("cli", "api", "operations")
            if (n := len(p.read_text().splitlines())) > 400]
    assert long == []
