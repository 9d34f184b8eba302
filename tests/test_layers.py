"""The layering rule: compiler/ never imports Qt, views or app; views never import app."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def _violations(package: str, forbidden: set[str]) -> list[str]:
    return [f"{p.relative_to(ROOT)} imports {sorted(_imports(p) & forbidden)}"
            for p in sorted((ROOT / package).rglob("*.py")) if _imports(p) & forbidden]


def test_compiler_imports_no_qt_views_or_app():
    assert _violations("compiler", {"PySide6", "PyQt5", "PyQt6", "shiboken6", "views", "app"}) == []


def test_views_never_import_app():
    assert _violations("views", {"app"}) == []


def test_detector_sees_a_violation(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from PySide6 import QtCore\nimport views.canvas\n")
    assert _imports(bad) == {"PySide6", "views"}


def test_compiler_runs_without_qt_loaded():
    code = ("import sys, compiler.frontends.onnx, compiler.interpreter, compiler.verify; "
            "assert not any(m.split('.')[0] in ('PySide6', 'views', 'app') for m in sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_no_two_modules_import_each_other():
    """Not even inside a function or for type checking: each pair imports one way only."""
    import grimp

    graph = grimp.build_graph("compiler", "app", "views")
    pairs = sorted({tuple(sorted((module, other))) for module in graph.modules
                    for other in graph.find_modules_directly_imported_by(module)
                    if module in graph.find_modules_directly_imported_by(other)})
    assert pairs == []


def test_no_module_is_longer_than_600_lines():
    root = Path(__file__).resolve().parents[1]
    long = [(str(p.relative_to(root)), n) for folder in ("compiler", "app", "views", "tests")
            for p in (root / folder).rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 600]
    assert long == []
