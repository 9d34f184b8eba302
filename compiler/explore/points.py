"""What the workbench shows of an exploration: its points, a point's description, progress.

Everything here reads an EXPLORE.json document (or one progress line of `kiln explore
--progress-json`) and returns plain numbers and text, so the Explore panel only draws them
and its words are tested without Qt.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from compiler.explore.config import Config


@dataclass(frozen=True)
class Point:
    """One measured trial as the scatter draws it (score in percent)."""

    number: int
    instructions: int
    score: float
    flash: int
    ram: int
    fits: bool
    feasible: bool
    front: bool
    float_layers: int


def points_of(doc: dict) -> list[Point]:
    """The measured trials of `doc`, in trial order (failed ones have no point)."""
    front = set(doc.get("front", []))
    points = []
    for t in doc.get("trials", []):
        m = t.get("measurement")
        if m is None:
            continue
        points.append(Point(int(t["number"]), int(m["instructions"]), 100 * float(m["score"]),
                            int(m["flash"]), int(m["ram"]), bool(m["fits"]),
                            bool(t.get("feasible")), t["number"] in front,
                            int(m.get("float_layers", 0))))
    return points


def floor_of(doc: dict) -> float:
    """The lowest score (percent) a feasible point may have: float minus the bound."""
    return 100 * (float(doc.get("float_score", 0.0)) - float(doc["problem"]["max_drop"]))


def score_name(doc: dict) -> str:
    """"accuracy", or "top-1 agreement" when the evaluation data has no labels."""
    return "accuracy" if doc.get("score", "accuracy") == "accuracy" else "top-1 agreement"


def trial_json(doc: dict, number: int) -> dict | None:
    """Trial `number`'s JSON, or None."""
    return next((t for t in doc.get("trials", []) if t.get("number") == number), None)


def describe_point(doc: dict, number: int) -> str:
    """A few lines for a tooltip: the figures, the verdict and the configuration."""
    t = trial_json(doc, number)
    if t is None:
        return f"no trial {number}"
    if "measurement" not in t:
        return f"Trial {number} failed: {t.get('error', 'no result')}"
    m, config = t["measurement"], Config.from_json(t["config"])
    verdict = ("feasible" if t.get("feasible") else
               "over the board's budget" if not m["fits"] else "loses more than the bound")
    lines = [f"Trial {number} ({t.get('source', 'search')}): {verdict}",
             f"{100 * m['score']:.2f} % {score_name(doc)}, {m['instructions']:,} instructions",
             f"flash {m['flash']:,} B, RAM {m['ram']:,} B, {m['float_layers']} float layers",
             config.summary()]
    if config.keep_float:
        lines.append("float: " + ", ".join(config.keep_float))
    return "\n".join(lines)


def front_rows(doc: dict) -> list[tuple]:
    """The front's table: (number, score %, instructions, flash, RAM, float layers, summary)."""
    rows = []
    for number in doc.get("front", []):
        t = trial_json(doc, number)
        if t is None or "measurement" not in t:
            continue
        m = t["measurement"]
        rows.append((number, 100 * m["score"], m["instructions"], m["flash"], m["ram"],
                     m["float_layers"], Config.from_json(t["config"]).summary()))
    return rows


def parse_progress(line: str) -> dict | None:
    """One `--progress-json` line as JSON, or None for any other line."""
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        doc = json.loads(line)
    except json.JSONDecodeError:
        return None
    return doc if isinstance(doc, dict) and "phase" in doc and "done" in doc else None


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds} s" if seconds < 90 else f"{seconds // 60} min {seconds % 60:02d} s"


def progress_text(progress: dict) -> str:
    """The progress line: trials done of the total, the best feasible so far, the time left."""
    done, total = progress["done"], progress["total"]
    if progress["phase"] == "accuracy control" and done == 0:
        return control_text(progress.get("control"), total)
    parts = [f"{done} of {total} trials"]
    best = progress.get("best")
    if best:
        parts.append(f"best feasible so far #{best['number']}: {100 * best['score']:.2f} %, "
                     f"{best['instructions']:,} instructions")
    else:
        parts.append("no feasible point yet")
    if progress["phase"] == "done":
        parts.append("finished" if done >= total else "stopped")
    elif progress.get("eta_seconds") is not None:
        parts.append(f"about {_duration(progress['eta_seconds'])} left")
    return "; ".join(parts)


STAGES = {"checking": "compiled", "ranking": "ranking tensors",
          "searching": "how many float"}


def control_text(control: dict | None, total: int) -> str:
    """Accuracy control's progress: its stage, measurements so far and the current score."""
    if not control:
        return f"Accuracy control: finding a first point within the bound (0 of {total} trials)"
    kept = control["float_tensors"]
    floor = 100 * (control["float_score"] - control["max_drop"])
    what = ("every tensor int8" if kept == 0 else
            f"{kept} tensor{'s' if kept != 1 else ''} float")
    return (f"Accuracy control ({STAGES.get(control['stage'], control['stage'])}): "
            f"{control['measured']} measured, {control['candidates']} candidates; "
            f"{100 * control['score']:.2f} % with {what}, bound {floor:.2f} %")


def record_text(doc: dict, path: Path) -> str:
    """A line about an EXPLORE.json read back: how many trials, complete or resumable."""
    trials = doc.get("trials", [])
    state = "complete" if doc.get("complete") else "stopped: Resume measures the rest"
    return (f"{Path(path).name}: {len(trials)} trials on {doc['problem']['target']}, "
            f"{len(doc.get('front', []))} on the front ({state})")


def error_sentence(stderr: str) -> str:
    """The one sentence a failed `kiln explore` printed (its last "kiln:" line)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    said = [line for line in lines if line.startswith("kiln:")
            and not line.startswith("kiln: warning:")]  # the panel shows the warnings
    if not said:
        return lines[-1] if lines else "the exploration stopped without a message"
    text = said[-1].removeprefix("kiln:").strip()
    return text.removeprefix("error:").strip()
