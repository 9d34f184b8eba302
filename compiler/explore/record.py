"""EXPLORE.json: every trial measured so far, the front, and what makes the run resumable.

The file is rewritten atomically after each trial, so a cancelled, killed or crashed
exploration keeps everything it measured. Run again with the same file and settings, the
search replays: each configuration already measured is read back by its key, never rerun.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from compiler.errors import KilnError
from compiler.fileio import atomic_write_bytes

FORMAT = "kiln-explore/1"


@dataclass
class Trial:
    """One configuration and what became of it."""

    number: int
    key: str
    config: dict
    overrides: dict
    result: dict  # {"measurement": ...} or {"error": ...}, with "worker" and "seconds"
    feasible: bool = False
    source: str = "search"  # "accuracy control" for the point it found

    def to_json(self) -> dict:
        """Plain JSON."""
        return {"number": self.number, "key": self.key, "source": self.source,
                "config": self.config, "profile_overrides": self.overrides,
                "feasible": self.feasible, **self.result}


@dataclass
class Record:
    """The whole exploration as written to EXPLORE.json."""

    settings: dict  # problem, seed, sampler, population, trials: what must match to resume
    float_score: float = 0.0
    labelled: bool = True
    control: dict | None = None
    trials: list[Trial] = field(default_factory=list)
    # Measured in a generation the run was stopped in: read back on resume, not yet a trial.
    pending: list[dict] = field(default_factory=list)
    front: list[int] = field(default_factory=list)
    best: dict[str, int] = field(default_factory=dict)
    first_feasible_seconds: float | None = None
    elapsed_seconds: float = 0.0
    complete: bool = False
    warnings: list[str] = field(default_factory=list)  # about the problem (a coarse data set)

    def to_json(self) -> dict:
        """The file's content."""
        return {"format": FORMAT, **self.settings, "float_score": self.float_score,
                "score": "accuracy" if self.labelled else "top-1 agreement",
                "accuracy_control": self.control, "complete": self.complete,
                "first_feasible_seconds": self.first_feasible_seconds,
                "elapsed_seconds": self.elapsed_seconds, "warnings": self.warnings,
                "front": self.front, "best_feasible": self.best,
                "trials": [t.to_json() for t in self.trials], "pending": self.pending}

    def measured(self) -> dict[str, dict]:
        """Key -> result of every trial measured (failures included: they fail again)."""
        return {t.key: t.result for t in self.trials}


def settings_of(doc: dict) -> dict:
    """The part of a record that must match for a run to resume it."""
    return {k: doc.get(k) for k in ("problem", "seed", "sampler", "population")}


def write_record(record: Record, path: Path) -> None:
    """Write atomically: a temporary file beside `path`, renamed over it."""
    atomic_write_bytes(Path(path), json.dumps(record.to_json(), indent=1).encode())


def read_record(path: Path) -> dict:
    """The JSON of an EXPLORE.json (KilnError naming the file when it is not one)."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise KilnError(f"{path}: not a readable exploration file ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise KilnError(f"{path}: not an exploration file (no \"format\": \"{FORMAT}\")")
    return doc


def trials_of(doc: dict) -> list[Trial]:
    """The trials of a record read back."""
    trials = []
    for t in doc.get("trials", []):
        result = {k: t[k] for k in ("measurement", "error", "worker", "seconds") if k in t}
        trials.append(Trial(int(t["number"]), t["key"], t["config"],
                            t.get("profile_overrides", {}), result, bool(t.get("feasible")),
                            t.get("source", "search")))
    return trials
