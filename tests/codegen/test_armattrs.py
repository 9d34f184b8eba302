"""Arm objects declare they pass no floats, so they link into hard-float firmware too."""

from __future__ import annotations

import io

import onnx
import pytest
from elftools.elf.elffile import ELFFile
from onnx import helper

from compiler.codegen.armattrs import float_calls, mark_vfp_args_compatible
from compiler.codegen.targets import get_target
from compiler.driver import compile_graph
from compiler.frontends.onnx import load_onnx
from compiler.passes.runner import run_pipeline
from tests.conftest import SAMPLE_MODEL
from tests.helpers import make_model


def _attributes(obj: bytes) -> dict[str, object]:
    elf = ELFFile(io.BytesIO(obj))
    section = elf.get_section_by_name(".ARM.attributes")
    return {a.tag: a.value for sub in section.iter_subsections()
            for subsub in sub.iter_subsubsections() for a in subsub.iter_attributes()}


def _compile(model, target: str) -> bytes:
    graph = run_pipeline(load_onnx(model), snapshots=False).graph
    return compile_graph(graph, get_target(target)).object


@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55"])
def test_hard_float_targets_are_marked_compatible(target):
    obj = _compile(onnx.load(SAMPLE_MODEL), target)
    attributes = _attributes(obj)
    assert attributes["TAG_ABI_VFP_ARGS"] == 3
    assert attributes["TAG_CPU_NAME"] == target  # the rest of the section survived
    elf = ELFFile(io.BytesIO(obj))
    assert elf.get_section_by_name(".symtab").get_symbol_by_name("net")  # still readable


def test_soft_float_targets_are_left_alone():
    obj = _compile(onnx.load(SAMPLE_MODEL), "cortex-m3")
    assert "TAG_ABI_VFP_ARGS" not in _attributes(obj)


def test_softmax_and_sigmoid_need_no_library_math():
    """exp is inlined, so the object calls no float function and gets the mark."""
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]),
             helper.make_node("Softmax", ["s"], ["y"], axis=-1)]
    model = make_model(nodes, [("x", "float32", [2, 7])], [("y", "float32", None)])
    obj = _compile(model, "cortex-m7")
    assert float_calls(obj) == []
    assert _attributes(obj)["TAG_ABI_VFP_ARGS"] == 3


def test_marking_is_idempotent_and_skips_non_arm():
    obj = _compile(onnx.load(SAMPLE_MODEL), "cortex-m7")
    assert mark_vfp_args_compatible(obj) == obj
    host = _compile(onnx.load(SAMPLE_MODEL), "x86-64")
    assert mark_vfp_args_compatible(host) == host
