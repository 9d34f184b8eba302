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
