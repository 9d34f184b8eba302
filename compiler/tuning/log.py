"""The tuning log: JSON lines, one measured candidate schedule per line.

Each line names its workload (the key and the description it hashes), the target, the Kiln
that measured it, the schedule, how it was measured (`instructions` under QEMU, `cycles` or
`ticks` on a board, `ns` on a host) and the cost, with the kernel's code and weight bytes
and whether its outputs equalled the interpreter's. `kiln compile --tuning LOG` applies the
best exact entry per workload; a workload key carries no model name, so a log made on one
model serves every model that shares a workload.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from compiler.errors import KilnError
from compiler.fileio import atomic_write_text

FORMAT = "kiln-tuning"
VERSION = 1


@dataclass(frozen=True)
class Entry:
    """One measured candidate (one line of the log)."""

    workload: str
    target: str
    kiln: str
    schedule: dict
    measure: str
    cost: float
    layers: int = 1
    code_bytes: int = 0
    weight_bytes: int = 0
    exact: bool = True
    description: dict = field(default_factory=dict)
    model: str = ""
    trial: int = 0

    @property
    def per_layer(self) -> float:
        """The cost of one layer of this workload (the log sums a model's layers)."""
        return self.cost / max(self.layers, 1)

    @property
    def bytes_per_layer(self) -> float:
        """Code and weight bytes of one layer with this schedule."""
        return (self.code_bytes + self.weight_bytes) / max(self.layers, 1)

    def schedule_key(self) -> tuple:
        """The schedule as a hashable, ordered tuple."""
        return tuple(sorted(self.schedule.items()))

    def line(self) -> str:
        """The entry as one JSON line."""
        doc = {"format": FORMAT, "version": VERSION, **asdict(self)}
        return json.dumps(doc, sort_keys=True, separators=(",", ":"))


_FIELDS = {"workload": str, "target": str, "kiln": str, "schedule": dict, "measure": str,
           "cost": (int, float)}


def _entry(doc, where: str) -> Entry:
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise KilnError(f"{where}: not a Kiln tuning log entry (no \"format\": \"{FORMAT}\")")
    if doc.get("version") != VERSION:
        raise KilnError(f"{where}: tuning log version {doc.get('version')!r} is not {VERSION}")
    for name, kind in _FIELDS.items():
        if not isinstance(doc.get(name), kind) or isinstance(doc.get(name), bool):
            raise KilnError(f"{where}: the entry's {name!r} is missing or not a "
                            f"{getattr(kind, '__name__', 'number')}")
    known = set(Entry.__dataclass_fields__)
    return Entry(**{k: v for k, v in doc.items() if k in known})


def read_log(path: str | Path) -> list[Entry]:
    """Every entry of the log at `path`; a missing file is an empty log.

    A malformed line is one sentence naming the file and the line.
    """
    path = Path(path)
    if not path.exists():
        return []
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise KilnError(f"{path}: cannot read the tuning log ({exc})") from None
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as exc:
            raise KilnError(f"{path}: line {number} of the tuning log is not JSON "
                            f"({exc.msg})") from None
        entries.append(_entry(doc, f"{path}: line {number}"))
    return entries


def write_log(path: str | Path, entries: Iterable[Entry]) -> None:
    """The log with exactly `entries`, replaced atomically (a stopped run keeps every line)."""
    atomic_write_text(Path(path), "".join(e.line() + "\n" for e in entries))


def log_hash(path: str | Path) -> str:
    """SHA-256 of the log's bytes, as the bundle's build file records it."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@dataclass(frozen=True)
class Chosen:
    """The schedules a log gives one target, and what was skipped and why."""

    schedules: tuple[tuple[str, tuple], ...]
    entries: dict[str, Entry]
    notes: tuple[str, ...]


def best_entries(entries: Iterable[Entry], target: str, kiln: str) -> Chosen:
    """The best exact entry per workload for `target` measured by this Kiln (`kiln`).

    Lowest cost per layer wins; ties go to the earlier line. Entries for another target or
    another Kiln are skipped with one note each kind.
    """
    other_target, other_kiln, inexact = set(), set(), 0
    best: dict[str, Entry] = {}
    for entry in entries:
        if entry.target != target:
            other_target.add(entry.target)
            continue
        if entry.kiln != kiln:
            other_kiln.add(entry.kiln)
            continue
        if not entry.exact:
            inexact += 1
            continue
        known = best.get(entry.workload)
        if known is None or entry.per_layer < known.per_layer:
            best[entry.workload] = entry
    notes = []
    if other_target:
        notes.append(f"tuning log entries for {', '.join(sorted(other_target))} skipped "
                     f"(compiling for {target})")
    if other_kiln:
        notes.append(f"tuning log entries measured by Kiln {', '.join(sorted(other_kiln))} "
                     f"skipped (this is Kiln {kiln}): tune again")
    if inexact:
        notes.append(f"{inexact} tuning log entries whose outputs differed skipped")
    schedules = tuple((key, e.schedule_key()) for key, e in sorted(best.items()))
    return Chosen(schedules, best, tuple(notes))


def entries_by_workload(entries: Iterable[Entry], target: str, kiln: str
                        ) -> dict[str, list[Entry]]:
    """Every exact entry for `target` measured by this Kiln, per workload (the budget's)."""
    found: dict[str, list[Entry]] = {}
    for entry in entries:
        if entry.target == target and entry.kiln == kiln and entry.exact:
            found.setdefault(entry.workload, []).append(entry)
    return found
