"""Hostile and unusual quantized models: refused in one sentence or run right, never a crash.

A seeded campaign (`tests/quant_fuzz/`) builds QOperator and QDQ graphs from scratch, mutates
them (attributes, inputs, element types, constants made graph inputs or shadowed, opsets,
scales, zero points, biases near the int32 limits), mutates the MLPerf Tiny int8 models of the
shared folder and writes int8 TFLite models mutated by field and by byte. Each mutant goes
through inspect, run (both engines) and compile, by `app.cli.main` for every eighth and by the
library for the rest: it must end in success or Kiln's refusal, with no other exception, no
Python warning and nothing stray on stderr; the compiled object must give the interpreter's
bytes; and where onnxruntime (its integer path for QDQ) or TFLite Micro accepts the model, the
interpreter must give theirs, except where they are known to be inexact (u8s8 kernels without
VNNI, int32 accumulators that overflow). Models the specifications forbid must be refused.

Each chunk records its class counts (`quant_fuzz` property) and prints them; the whole table:
`python -m tests.quant_fuzz` (add `--long`, or `replay LABEL` to write one mutant's file).
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from tests.conftest import require_module, shared_models
from tests.quant_fuzz import check
from tests.quant_fuzz.campaign import KNOWN, SEED, chunks, format_summary, run_chunk, tally
from tests.quant_fuzz.sources import (
    SHARED_SOURCES,
    TFLITE_SOURCES,
    Mutant,
    make_mutant,
    source_available,
)


@pytest.mark.slow
@pytest.mark.parametrize("source,start,stop", chunks(),
                         ids=[f"{s}-{a}" for s, a, _ in chunks()])
def test_hostile_quantized_models(source, start, stop, oracle, tmp_path, record_property):
    if source in SHARED_SOURCES and not source_available(source):
        shared_models()  # skips without the folder (fails under CI); here a file is missing
        missing = f"the shared models source {source} mutates are not all there"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(missing + "; CI must have them")
        pytest.skip(missing)
    if source in TFLITE_SOURCES:
        require_module("tflite_micro", "the tflite-micro wheel exists for Linux x86-64 only")
    records = run_chunk(source, range(start, stop), oracle, tmp_path)
    counts = tally(records)
    record_property("quant_fuzz", json.dumps(counts))
    print(f"{source} {start}..{stop - 1} (seed {SEED}):\n{format_summary(counts)}")
    unknown = sorted(set(counts["failures"]) - set(KNOWN))
    assert not unknown, (
        f"{len(unknown)} failure classes in {source} {start}..{stop - 1}; rebuild a mutant with "
        f"`python -m tests.quant_fuzz replay LABEL`:\n{format_summary(counts)}")


def test_mutants_are_deterministic():
    require_module("tflite_micro", "its schema writes the TFLite field mutants")
    for source in ("qop", "qdq", "tflite-built", "tflite-bytes"):
        first, again = make_mutant(source, 7, 3), make_mutant(source, 7, 3)
        assert first.data == again.data and first.how == again.how
        assert make_mutant(source, 8, 3).data != first.data


class _Answers:
    """An oracle that answers with fixed outputs."""

    def __init__(self, outputs):
        self.outputs = outputs

    def ask(self, kind, *args):
        return "ok", self.outputs


def _qop_mutant() -> Mutant:
    for index in range(50):
        mutant = make_mutant("qop", index, 1)
        if not mutant.how.count("mutated") and not mutant.overflow:
            return mutant
    raise AssertionError("no unmutated QOperator graph among the first 50")


def test_an_oracle_answering_otherwise_is_a_failure_unless_known_inexact(monkeypatch, tmp_path):
    mutant = _qop_mutant()
    record = check.Record(mutant)
    names, feeds, outputs = check.library_flow(record, arm=False)
    assert not record.failures, record.failures
    wrong = {n: np.asarray(a) + np.ones_like(a) for n, a in outputs["loaded"].items()}
    check._ask_oracle(record, _Answers(wrong), names, feeds, outputs)
    assert record.oracle == "differs" and record.failures[0][0] == "ort oracle differs"
    monkeypatch.setattr(check, "u8s8_inexact_reason", lambda: "no VNNI here")
    inexact = check.Record(Mutant(**{**mutant.__dict__, "u8s8": True}))
    check._ask_oracle(inexact, _Answers(wrong), names, feeds, outputs)
    assert inexact.oracle.startswith("inexact") and not inexact.failures


def test_a_refusal_is_classed_without_names_or_numbers():
    mutant = _qop_mutant()
    record = check.Record(mutant)
    record.refuse("load", f"{mutant.label}: node qconv_3 (QLinearConv): scale 0.0 of 'ws8' "
                          "must be positive; see [1, 2]")
    assert record.refusal == "load: node N (QLinearConv): scale # of '…' must be positive"
    assert record.names_node and not record.failures
    record.refuse("compile", "pass to_integer failed (ShapeError: bad)")
    assert record.failures == [("refusal quotes a Python exception: ShapeError",
                                "at compile: pass to_integer failed (ShapeError: bad)")]
