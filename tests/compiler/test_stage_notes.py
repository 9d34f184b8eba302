"""Stage notes: keys that name each pass run as `kiln run --stage` does, and saved-table checks."""

from __future__ import annotations

import pytest

from compiler.driver import compilation
from compiler.errors import KilnError
from compiler.frontends.load import load_model
from compiler.stage_notes import (
    change_summary,
    check_notes,
    first_sentence,
    notes_by_stage,
    stage_keys,
)
from tests.conftest import SAMPLE_MODEL


def test_every_key_names_its_own_run_for_the_driver():
    compiled = compilation(load_model(SAMPLE_MODEL))
    records = compiled.passes(snapshots=True).records
    keys = stage_keys([r.name for r in records])
    assert len(set(keys)) == len(keys)
    assert "dce" in keys and "dce#2" in keys and "prepare_for_codegen" in keys
    for key, record in zip(keys, records):
        # The key reaches the very snapshot of its run through the driver's own lookup.
        assert compiled.stage(key) is record.snapshot, key


def test_notes_follow_their_stage_and_repeated_runs_are_told_apart():
    names = ["dce", "cse", "dce", "dce"]
    assert stage_keys(names) == ["dce", "cse", "dce#2", "dce#3"]
    notes = {"dce#2": "second sweep", "cse": "shared subexpressions"}
    assert notes_by_stage(names, notes) == ["", "shared subexpressions", "second sweep", ""]


def test_a_saved_table_is_checked_and_blank_notes_are_dropped():
    assert check_notes({"dce#1": "first", "cse": "  ", "fuse_activations": "x"}) == {
        "dce": "first", "fuse_activations": "x"}
    with pytest.raises(KilnError, match="'dce#0' is not a stage"):
        check_notes({"dce#0": "x"}, "s.kiln")
    with pytest.raises(KilnError, match="the note on cse is not text"):
        check_notes({"cse": 3})
    with pytest.raises(KilnError, match="must be an object"):
        check_notes(["cse"])
    with pytest.raises(KilnError, match="more than"):
        check_notes({"cse": "x" * 30_000})


def test_a_record_is_summed_up_in_one_line():
    records = compilation(load_model(SAMPLE_MODEL)).passes().records
    to_nhwc = next(r for r in records if r.name == "to_nhwc")
    assert change_summary(to_nhwc) == (
        f"{to_nhwc.nodes_before} → {to_nhwc.nodes_after} nodes: +{len(to_nhwc.added)} added, "
        f"−{len(to_nhwc.removed)} removed, ~{len(to_nhwc.modified)} modified")
    idle = next(r for r in records if not r.changed)
    assert change_summary(idle).startswith("changed nothing")
    assert first_sentence("Fold a thing.\n  Then more. And more.") == "Fold a thing."
    assert first_sentence("No full stop") == "No full stop"
