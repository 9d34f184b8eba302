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


def test_the_command_line_imports_no_qt_or_views():
    assert _violations("app/cli", {"PySide6", "PyQt5", "PyQt6", "shiboken6", "views"}) == []


def test_every_command_runs_without_qt_loaded():
    """Each command module imported, as `kiln COMMAND` imports it: no Qt, views or window."""
    code = ("import sys, app.cli; from app.cli import COMMANDS; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('PySide6', 'views') "
            "or m.startswith('app.window')]; assert not bad, bad; print(len(COMMANDS))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) >= 13


def test_no_app_folder_holds_more_than_20_modules():
    """Features live in packages of their own (app/quant, app/export, ...), not one flat folder."""
    crowded = {str(folder.relative_to(ROOT)): n for folder in [ROOT / "app",
                                                              *(ROOT / "app").rglob("*/")]
               if (n := len(list(folder.glob("*.py")))) > 20}
    assert crowded == {}


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

    graph = grimp.build_graph("compiler", "app", "views", cache_dir=None)
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


def _compiler_layers() -> list[set[str]]:
    """The layers of compiler/, highest first, as pyproject.toml's import-linter contract says."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"]
                   if c["type"] == "layers" and c["containers"] == ["compiler"]]
    return [{name.strip() for name in layer.split("|")} for layer in contract["layers"]]


def _upward_imports(edges) -> list[str]:
    """`edges` (importer, imported) of compiler modules that run up a layer or sideways."""
    rank = {package: i for i, layer in enumerate(_compiler_layers()) for package in layer}
    bad = []
    for importer, imported in edges:
        a, b = importer.split(".")[1], imported.split(".")[1]
        if a != b and rank[a] >= rank[b]:
            bad.append(f"{importer} imports {imported}")
    return sorted(bad)


def test_no_compiler_module_imports_a_higher_layer():
    """Every import, inside functions too (grimp reads them all), runs down the layers."""
    import grimp

    graph = grimp.build_graph("compiler", cache_dir=None)
    packages = {m.split(".")[1] for m in graph.modules if m.count(".") >= 1}
    assert packages <= set().union(*_compiler_layers()), "a package missing from the layers"
    edges = [(m, o) for m in graph.modules for o in graph.find_modules_directly_imported_by(m)
             if m.count(".") >= 1 and o.count(".") >= 1]
    assert len(edges) > 500
    assert _upward_imports(edges) == []


def test_the_layer_check_sees_an_upward_import():
    assert _upward_imports([("compiler.qmath.requant", "compiler.driver"),
                            ("compiler.driver", "compiler.qmath.requant"),
                            ("compiler.quant.profile", "compiler.harness.guarded")]) == [
        "compiler.qmath.requant imports compiler.driver",
        "compiler.quant.profile imports compiler.harness.guarded"]
