"""Checking an exploration's front from its file alone: re-apply, compile, count, weigh, score.

Shared by the tests on the sample and on the MLPerf Tiny models. Each front point is rebuilt
by `apply_point` from EXPLORE.json (a fresh problem, not the run's), written as a bundle by the
export path, and its figures compared exactly: flash and RAM from the bundle's report, the
instructions of one inference under QEMU, the score from the compiled host code.
"""

from __future__ import annotations

import json
from pathlib import Path

from compiler.driver import compilation
from compiler.explore.apply import apply_point
from compiler.explore.measure import INPUT_SEED, float_layer_count, score_of
from compiler.explore.problem import ProblemSpec, load_problem
from compiler.mcu.counting import inference_instructions


def bundle_footprint(report: dict) -> tuple[int, int]:
    """(flash, RAM) from a bundle's NET.report.json: code, read-only data and constants;
    initialized and zeroed data, the mutable region and the arena."""
    s, r = report["sections"], report["regions"]
    return (s["text"] + s["rodata"] + r["constant"],
            s["data"] + s["bss"] + r["mutable"] + r["activations"])


def verify_front(doc: dict, folder: Path) -> list[int]:
    """Re-apply every front point of `doc`; assert its figures; the numbers checked."""
    assert doc["front"], "the exploration found no feasible point"
    problem = load_problem(ProblemSpec.from_json(doc["problem"]))
    assert problem.float_score == doc["float_score"]
    for number in doc["front"]:
        point = apply_point(doc, number, problem)
        compiled = compilation(point.qdq)
        where = folder / f"point{number}"
        compiled.bundle(where, point.options, problem.board)
        report = json.loads((where / f"{point.options.name}.report.json").read_text())
        flash, ram = bundle_footprint(report)
        net = compiled.net(point.options)
        got = {"score": score_of(problem, point.qdq),
               "instructions": inference_instructions(net, INPUT_SEED),
               "flash": flash, "ram": ram, "float_layers": float_layer_count(compiled.final)}
        want = {k: point.reported[k] for k in got}
        assert got == want, f"trial {number}: re-applied {got}, reported {want}"
        assert doc["float_score"] - got["score"] <= doc["problem"]["max_drop"] + 1e-12
    return list(doc["front"])
