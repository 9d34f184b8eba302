"""Line links of the Code panel: a kernel's low-level IR, LLVM IR and assembly lines go together."""

from __future__ import annotations

import re
from dataclasses import replace

from compiler.codegen.line_map import (
    ASSEMBLY,
    LLVM_IR,
    LOWIR,
    VIEWS,
    assembly_spans,
    function_spans,
)
from compiler.driver import Options, compilation
from compiler.frontends.load import load_model
from compiler.frontends.onnx import load_onnx
from tests.conftest import SAMPLE_MODEL, shared_models


def _linked(graph, target: str):
    compiled = compilation(graph)
    options = Options(target)
    return compiled, compiled.kernels(options).linked_code(target)


def _check_spans(code) -> None:
    """Each link's lines are its own functions', whole, in every listing."""
    llvm, asm = code.llvm_ir.splitlines(), code.assembly.splitlines()
    lowir = code.lowir.splitlines()
    for link in code.map.links:
        ((line, _),) = link.lines[LOWIR]
        assert re.match(r"^\s*\d+\s", lowir[line]), lowir[line]  # an instruction with a step
        assert len(link.lines[LLVM_IR]) == len(link.lines[ASSEMBLY]) == len(link.symbols)
        names = set()
        for first, last in link.lines[LLVM_IR]:
            assert llvm[first].startswith("define") and llvm[last] == "}"
            names.add(re.search(r"@\"?([\w.]+)\"?\(", llvm[first]).group(1))
        assert names == set(link.symbols)
        for first, last in link.lines[ASSEMBLY]:
            name = asm[first].split(":")[0].strip('"')
            assert name in link.symbols
            assert re.match(rf"\s*\.size\s+\"?{re.escape(name)}\"?,", asm[last]), asm[last]


def test_every_kernel_of_the_sample_is_linked_on_a_host_and_a_microcontroller():
    graph = load_onnx(SAMPLE_MODEL)
    for target in ("host", "cortex-m4"):
        compiled, code = _linked(graph, target)
        _check_spans(code)
        # The same functions as the build `kiln bench --target` counts instructions in.
        net = compiled.net(replace(Options(target), separate_kernels=True))
        assert [link.symbols for link in code.map.links] == [(k.symbol,) for k in net.kernels]
        ops = [line for line in code.lowir.splitlines() if re.match(r"^\s*\d+\s", line)]
        assert [link.label.split(" ", 1)[1] for link in code.map.links] == \
            [line.split()[1] for line in ops]
        # Every kernel function is tinted; the entry point (no kernel of its own) is not.
        defined = [s for s in function_spans(code.llvm_ir) if s != "net"]
        assert len(code.map.tints[LLVM_IR]) == len(defined) == len(code.map.links)
        entry = function_spans(code.llvm_ir)["net"]
        assert code.map.at(LLVM_IR, entry[0]) is None
        assert code.map.at(LOWIR, 0) is None  # the `input image` line


def test_a_line_leads_to_its_link_in_every_listing():
    graph = load_onnx(SAMPLE_MODEL)
    _, code = _linked(graph, "cortex-m4")
    for link in code.map.links:
        for view in VIEWS:
            for first, last in link.lines[view]:
                assert code.map.at(view, (first + last) // 2) is link
        assert code.map.of_node(link.nodes[0]) is link
        assert link.colour == code.map.links.index(link)
    assert code.map.of_node("no such node") is None


def test_spans_read_quoted_names_and_arm_listings():
    llvm_ir = ('; comment\ndefine internal void @"net.k0.Conv"(ptr %a) #0 {\nentry:\n  ret void\n'
               '}\n\ndefine i32 @net(ptr %x) {\n  ret i32 0\n}\n')
    assert function_spans(llvm_ir) == {"net.k0.Conv": (1, 4), "net": (6, 8)}
    assembly = ('\t.type\tnet.k0.Conv,%function\n\t.thumb_func\nnet.k0.Conv:\n\tbx\tlr\n'
                '.Lfunc_end1:\n\t.size\tnet.k0.Conv, .Lfunc_end1-net.k0.Conv\n'
                '"net.k1.odd name":\n\tret\n')
    assert assembly_spans(assembly, {"net.k0.Conv", "net.k1.odd name", "absent"}) == \
        {"net.k0.Conv": (2, 5), "net.k1.odd name": (6, 7)}


def test_a_row_streamed_chain_links_each_stage_to_its_one_row_kernels():
    models = shared_models()
    graph = load_model(models / "tflite" / "pretrainedResnet_quant.tflite")
    _, code = _linked(graph, "host")
    _check_spans(code)
    chain = code.map.links[0]
    assert "RowChain" in chain.label and chain.symbols[0].endswith(".RowChain")
    stage = code.map.of_node("CONV_2D_1")
    assert stage is not chain and stage.nodes == ("CONV_2D_1",)
    assert stage.lines[LOWIR] == chain.lines[LOWIR]  # one instruction runs the whole chain
    assert set(stage.symbols) < set(chain.symbols) and len(stage.symbols) >= 2
    # A stage's functions take its colour; the low-level IR line the chain's.
    for first, last in stage.lines[ASSEMBLY]:
        assert code.map.at(ASSEMBLY, first) is stage and code.map.at(ASSEMBLY, last) is stage
    assert code.map.at(LOWIR, chain.lines[LOWIR][0][0]) is chain
    gemm = code.map.of_node("FULLY_CONNECTED_14")
    assert gemm.symbols == ("net.k1.QGemm",) and "QGemm" in code.lowir.splitlines()[
        gemm.lines[LOWIR][0][0]]

