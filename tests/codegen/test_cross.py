"""Objects build for every target: the sample model and the four MLPerf Tiny float models each
compile into a relocatable ELF of the target's machine and class that exports only its entry
point, with the weights embedded as read-only data.

The full matrix costs about 100 s of CPU, mostly LLVM's ARM back end on the two big models.
KILN_CROSS=quick (for a developer's loop) builds those two only for one target per distinct code
path (x86 with AVX, Thumb-1 without FPU, v7E-M with FPU, MVE, AArch64, RISC-V), about 57 s; the
small models still cover every target.
"""

from __future__ import annotations

import os
from functools import cache

import onnx
import pytest

from compiler.codegen.targets import get_target, target_names
from compiler.driver import compile_graph
from compiler.frontends.onnx import load_onnx
from compiler.passes.runner import run_pipeline
from tests.codegen.objects import ELF_MACHINES, check_object
from tests.conftest import SAMPLE_MODEL, shared_models

TARGETS = target_names()
SMALL = ["ad01_fp32", "kws_ref_model_float32"]
BIG = ["pretrainedResnet", "vww_96_float"]
QUICK_TARGETS = ["host", "cortex-m0plus", "cortex-m7", "cortex-m55", "aarch64", "riscv32"]
BIG_TARGETS = QUICK_TARGETS if os.environ.get("KILN_CROSS") == "quick" else TARGETS

def test_every_target_is_covered():
    """The table above knows every target's architecture (a new target must be added here)."""
    assert len(TARGETS) >= 10
    for name in TARGETS:
        assert get_target(name).triple.split("-")[0] in ELF_MACHINES, name


@cache
def _graph(model: str):
    if model == "sample":
        return run_pipeline(load_onnx(onnx.load(SAMPLE_MODEL)), snapshots=False).graph
    path = shared_models() / "onnx" / f"{model}.onnx"
    assert path.exists(), f"{path.name} is missing from the shared models folder"
    return run_pipeline(load_onnx(onnx.load(path)), snapshots=False).graph


def _check_object(model: str, target_name: str, entry: str) -> None:
    graph = _graph(model)
    target = get_target(target_name)
    net = compile_graph(graph, target, name=entry)
    elf = check_object(net, target, entry)
    weights = sum(c.type.nbytes for c in graph.used_constants() if c.type.dtype == "float32")
    rodata = sum(s["sh_size"] for s in elf.iter_sections() if s.name.startswith(".rodata"))
    assert rodata >= weights * 0.9, f"{model} for {target_name}: weights not embedded"


@pytest.mark.parametrize("target", TARGETS)
def test_sample_model(target):
    _check_object("sample", target, "digits")


@pytest.mark.parametrize("model,target", [(m, t) for m in SMALL for t in TARGETS]
                         + [(m, t) for m in BIG for t in BIG_TARGETS])
def test_mlperf_tiny(model, target):
    _check_object(model, target, "net")
