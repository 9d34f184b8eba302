"""The sample model compiles for every MCU target into an ELF exporting only its entry point."""

from __future__ import annotations

import io

import onnx
import pytest
from elftools.elf.elffile import ELFFile

from compiler.codegen.build import compile_graph
from compiler.codegen.targets import get_target
from compiler.frontends.onnx import load_onnx
from compiler.passes.runner import run_pipeline
from tests.conftest import SAMPLE_MODEL


@pytest.fixture(scope="module")
def sample_graph():
    return run_pipeline(load_onnx(onnx.load(SAMPLE_MODEL)), snapshots=False).graph


@pytest.mark.parametrize("name,machine", [
    ("cortex-m0plus", "EM_ARM"), ("cortex-m4", "EM_ARM"), ("cortex-m7", "EM_ARM"),
    ("cortex-m33", "EM_ARM"), ("cortex-m55", "EM_ARM"), ("aarch64", "EM_AARCH64"),
    ("riscv32", "EM_RISCV")])
def test_sample_model_for_target(sample_graph, name, machine):
    net = compile_graph(sample_graph, get_target(name), name="digits")
    elf = ELFFile(io.BytesIO(net.object))
    assert elf["e_machine"] == machine
    symbols = elf.get_section_by_name(".symtab")
    exported = {s.name for s in symbols.iter_symbols()
                if s["st_info"]["bind"] == "STB_GLOBAL" and s["st_shndx"] != "SHN_UNDEF"}
    assert exported == {"digits"}
    weights = sum(c.type.nbytes for c in sample_graph.used_constants()
                  if c.type.dtype == "float32")
    rodata = sum(s["sh_size"] for s in elf.iter_sections() if s.name.startswith(".rodata"))
    assert rodata >= weights * 0.9  # the weights are embedded as read-only data (flash)
