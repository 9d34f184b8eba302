"""slice_of_concat: a Slice that takes one joined input reads that input, and the join dies.

The keyword-spotting LSTM (tests/tflite/built_models.py) joins its 49 unrolled steps and then
keeps only the last: after the pass no Concat is left, its result is unchanged, and the arena
holds a few states instead of all 49.
"""

from __future__ import annotations

import numpy as np
import pytest

from compiler.driver import compilation
from compiler.frontends.load import load_model
from compiler.interpreter import run
from compiler.ir.state import Stream
from compiler.passes.pipeline import PassConfig, Pipeline, default_pipeline
from tests.tflite.built_models import kws_lstm
from tests.tflite.writer import write


def _without(name: str) -> Pipeline:
    return Pipeline([PassConfig(c.name, c.enabled and c.name != name, c.mode, c.max_iterations,
                                c.note) for c in default_pipeline()])


@pytest.mark.parametrize("integer", [False, True], ids=["float32", "int8"])
def test_the_lstm_reads_its_last_step_and_drops_the_join(integer):
    model, shapes = kws_lstm(integer)
    data = write(model)
    with_pass = compilation(load_model(data))
    without = compilation(load_model(data), _without("slice_of_concat"))
    assert "Concat" not in {n.op for n in with_pass.final.nodes}
    assert "Concat" in {n.op for n in without.final.nodes}
    rng = np.random.default_rng(2)
    x = (rng.integers(-128, 128, shapes["mfcc"]).astype(np.int8) if integer
         else rng.standard_normal(shapes["mfcc"]).astype(np.float32))
    ours = Stream(with_pass.final).run({"mfcc": x}, lambda f: run(with_pass.final, f))
    theirs = Stream(without.final).run({"mfcc": x}, lambda f: run(without.final, f))
    name = with_pass.final.outputs[0].name
    np.testing.assert_array_equal(ours[name], theirs[without.final.outputs[0].name])
    kept, joined = with_pass.plan().arena.size, without.plan().arena.size
    assert kept * 4 <= joined, (kept, joined)
