"""A teacher's notes on pipeline stages: their keys, and the checks a saved set must pass.

A note belongs to a stage, named as `Pipeline.stage_index` and `kiln run --stage` name it: the
pass's name for its first run, `name#k` for its k-th run. A name survives a rerun of the
pipeline and a reload of the model, where a stage's position in the panel would not when a
pass is switched off.
"""

from __future__ import annotations

import re

from compiler.errors import KilnError

NOTE_CHARS = 20_000  # a page of text per stage; a bigger one is a pasted file, not a note
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(#[1-9][0-9]*)?")


def stage_keys(names: list[str]) -> list[str]:
    """The key of each pass run, in order: `name` for a pass's first run, `name#k` after."""
    seen: dict[str, int] = {}
    keys = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        keys.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return keys


def canonical_key(key: str) -> str:
    """`name#1` is the same stage as `name`: one spelling, so one stage has one note."""
    return key[:-2] if key.endswith("#1") else key


def check_notes(data, where: str = "notes") -> dict[str, str]:
    """A saved notes table as {stage key: text}, empty notes dropped; KilnError if malformed.

    Notes come from files people edit by hand and share: every key must name a stage and
    every text be a string of reasonable size, or the whole table is refused in one sentence.
    """
    if not isinstance(data, dict):
        raise KilnError(f"{where}: the notes must be an object of stage name to text")
    notes: dict[str, str] = {}
    for key, text in data.items():
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise KilnError(f"{where}: {key!r} is not a stage (a pass name, or name#k for "
                            f"its k-th run)")
        if not isinstance(text, str):
            raise KilnError(f"{where}: the note on {key} is not text")
        if len(text) > NOTE_CHARS:
            raise KilnError(f"{where}: the note on {key} has {len(text)} characters, more "
                            f"than {NOTE_CHARS}")
        if text.strip():
            notes[canonical_key(key)] = text
    return notes


def notes_by_stage(names: list[str], notes: dict[str, str]) -> list[str]:
    """The note of each pass run in `names` ("" where there is none)."""
    return [notes.get(key, "") for key in stage_keys(names)]


def change_summary(record) -> str:
    """What a pass record says it did, in one line: node counts before and after, the diff."""
    if not record.changed:
        return f"changed nothing ({record.nodes_after} nodes)"
    runs = f" over {record.iterations} iterations" if record.iterations > 1 else ""
    return (f"{record.nodes_before} → {record.nodes_after} nodes: +{len(record.added)} added, "
            f"−{len(record.removed)} removed, ~{len(record.modified)} modified{runs}")


def first_sentence(doc: str) -> str:
    """The first sentence of a pass's documentation (a caption has room for one)."""
    text = " ".join(doc.split())
    end = text.find(". ")
    return text if end < 0 else text[:end + 1]
