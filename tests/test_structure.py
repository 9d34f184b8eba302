"""The code's shape: small modules, and no two modules that import each other.

Imports inside functions count too: a loop hidden in a function still ties two modules into
one unit that cannot be read, tested or replaced alone.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("compiler", "app", "views")
MAX_LINES = 600


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Project modules `name` imports anywhere in its body (functions included)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets.add(base)
            targets.update(f"{base}.{alias.name}" for alias in node.names)
    return {t for t in targets if t in known and t != name}


def test_no_module_is_over_the_line_limit():
    long = {name: n for name, path in _modules().items()
            if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_no_two_modules_import_each_other():
    known = _modules()
    graph = {name: _imports(name, path, known) for name, path in known.items()}
    pairs = sorted({tuple(sorted((a, b))) for a, targets in graph.items() for b in targets
                    if a in graph.get(b, ())})
    assert not pairs, f"modules importing each other: {pairs}"


def test_the_checker_sees_imports_inside_functions(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("def f():\n    from compiler.ir import graph\n    return graph\n")
    assert "compiler.ir.graph" in _imports("compiler.m", path, _modules())


def test_signals_are_blocked_through_one_helper():
    """`views.signals.signals_blocked` restores signals even when an update raises; a bare
    pair of blockSignals calls leaves a widget deaf after an exception."""
    offenders = [str(p.relative_to(ROOT)) for folder in ("app", "views")
                 for p in (ROOT / folder).rglob("*.py")
                 if "blockSignals(" in p.read_text() and p.name != "signals.py"]
    assert offenders == []
