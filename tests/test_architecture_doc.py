"""docs/architecture.md names real files and every package: a checklist that points at a file
that moved is worse than none, and a package it leaves out is one nobody finds."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
README = ROOT / "README.md"
PATH = re.compile(r"`?((?:compiler|app|views|tests|docs)/[\w/.<>-]*)")


def _named_paths(text: str) -> set[str]:
    return {m.rstrip("/.") for m in PATH.findall(text) if "<" not in m}


def test_every_path_the_architecture_names_exists():
    named = _named_paths(DOC.read_text())
    assert len(named) > 30
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert missing == [], f"docs/architecture.md names files that do not exist: {missing}"


def test_the_readme_layout_lists_every_compiler_package():
    packages = sorted(p.name for p in (ROOT / "compiler").iterdir()
                      if (p / "__init__.py").exists())
    layout = README.read_text().split("## Layout", 1)[1].split("\n## ", 1)[0]
    assert [p for p in packages if p not in layout] == []


def test_the_panel_checklist_holds_for_every_panel():
    """Each feature in app/window/panels.py lives in a package of app/, has install() and
    screenshots(), and reads no other controller off the window with getattr."""
    import inspect

    from app.window.panels import FEATURES

    text = DOC.read_text().split("### A new panel", 1)[1].split("\n### ", 1)[0]
    assert "FEATURES" in text and "never another" in text
    for attribute, module in FEATURES:
        path = Path(module.__file__).relative_to(ROOT)
        assert path.parts[0] == "app" and len(path.parts) == 3, f"{attribute}: {path}"
        assert callable(getattr(module, "install", None)), attribute
        assert list(inspect.signature(module.screenshots).parameters) == ["window", "save"]
        source = Path(module.__file__).read_text()
        assert "getattr(window," not in source and "getattr(self.window," not in source, (
            f"{path} reads another controller off the window")


def test_the_cli_checklist_holds_for_every_command():
    """Each command of the table is a module of app/cli with add_parser(sub) and run(args),
    and takes --json, --quiet and --verbose."""
    from app import cli

    text = DOC.read_text().split("### A new CLI command", 1)[1]
    assert "COMMANDS" in text and "add_parser(sub)" in text and "run(args)" in text
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    assert set(sub.choices) == set(cli.COMMANDS)
    modules = [m.__name__ for m in cli.COMMANDS.values()]
    assert len(set(modules)) == len(modules), "one module per command"
    for name, module in cli.COMMANDS.items():
        assert module.__name__.startswith("app.cli."), name
        assert callable(module.add_parser) and callable(module.run), name
        flags = {o for a in sub.choices[name]._actions for o in a.option_strings}
        assert {"--json", "--quiet", "--verbose"} <= flags, name
