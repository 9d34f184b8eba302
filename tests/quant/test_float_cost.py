"""What keeping a tensor float costs, against counts made here: the plans' arenas, the objects'
sections read with pyelftools, and the float layer's MACs from its shapes."""

from __future__ import annotations

import io
from dataclasses import replace

import numpy as np
import pytest
from elftools.elf.elffile import ELFFile

from compiler.driver import Options, compilation
from compiler.frontends.load import load_model
from compiler.quant.calibration_data import load_calibration
from compiler.quant.float_cost import keep_float_cost
from compiler.quant.profiler import profile_model
from compiler.quant.recipe import QuantRecipe, quantize_with
from tests.conftest import SAMPLE_MODEL

KEPT = "relu2_out"  # the second convolution's output: keeping it float keeps that layer float
OPTIONS = Options("cortex-m7")


@pytest.fixture(scope="module")
def digits():
    graph = load_model(SAMPLE_MODEL)
    profile = profile_model(graph, load_calibration("digits:train", graph), "digits", bins=64)
    return graph, QuantRecipe.of_profile(profile, graph)


def _flash(net) -> int:
    """Code and read-only data of the object, as a board's flash budget counts them, plus
    external weights (none here)."""
    elf = ELFFile(io.BytesIO(net.object))
    return len(net.constant) + sum(s["sh_size"] for s in elf.iter_sections()
                                   if s["sh_flags"] & 0x2 and s.name.startswith((".text",
                                                                                 ".rodata")))


def _conv_macs(graph, name: str) -> int:
    """One multiply-accumulate per output element per weight it reads."""
    node = next(n for n in graph.nodes if n.name == name)
    out, weight = node.outputs[0].type.shape, node.inputs[1].type.shape
    return int(np.prod(out)) * int(np.prod(weight[1:]))


def _by_hand(graph, recipe):
    compiled = compilation(quantize_with(graph, recipe))
    return compiled.plan(OPTIONS).arena.size, _flash(compiled.net(OPTIONS))


def test_keeping_a_tensor_float_costs_what_both_compiled_models_say(digits):
    graph, recipe = digits
    cost = keep_float_cost(graph, recipe, KEPT, OPTIONS)
    kept = recipe.but(profile=replace(recipe.profile, keep_float=[KEPT]))
    for footprint, which in ((cost.quantized, recipe), (cost.kept, kept)):
        arena, flash = _by_hand(graph, which)
        assert (footprint.arena, footprint.flash) == (arena, flash)
    assert cost.kept.arena > cost.quantized.arena  # float activations are four times wider
    assert cost.layers == ("conv2",)
    assert cost.quantized.float_macs == 0  # the int8 model computes nothing in float
    assert cost.kept.float_macs == _conv_macs(graph, "conv2")
    assert cost.target == "cortex-m7"
    text = cost.text()
    assert text.startswith(f"Keeping {KEPT} float on cortex-m7: arena "
                           f"+{cost.kept.arena - cost.quantized.arena:,} B "
                           f"({cost.quantized.arena:,} → {cost.kept.arena:,}), flash ")
    assert text.endswith("; layers it leaves float: conv2.")


def test_the_cost_is_the_same_whether_the_recipe_keeps_the_tensor_or_not(digits):
    graph, recipe = digits
    asked = keep_float_cost(graph, recipe, KEPT, OPTIONS)
    kept = recipe.but(profile=replace(recipe.profile, keep_float=[KEPT]))
    assert keep_float_cost(graph, kept, KEPT, OPTIONS) == asked
    # Another tensor kept float stays so on both sides: only KEPT's layer is its cost.
    both = recipe.but(keep_float=("pool1_out",))
    cost = keep_float_cost(graph, both, KEPT, OPTIONS)
    assert cost.layers == ("conv2",) and "conv3" in cost.quantized.float_layers
    assert cost.kept.float_macs - cost.quantized.float_macs == _conv_macs(graph, "conv2")


def test_the_instructions_of_keeping_a_tensor_float_are_kiln_bench_counts(digits):
    from compiler.harness.cortex_m_bench import bench_compilation
    from compiler.quant.float_cost import keep_float_instructions
    from tests.codegen import firmware as test_firmware

    test_firmware.require_tools()
    graph, recipe = digits
    quantized, kept = keep_float_instructions(graph, recipe, KEPT, OPTIONS)
    with_it = recipe.but(profile=replace(recipe.profile, keep_float=[KEPT]))
    benched = [bench_compilation(compilation(quantize_with(graph, r)), "cortex-m7",
                                 peer=False).kiln.total for r in (recipe, with_it)]
    assert [quantized, kept] == benched
    assert kept > quantized  # the layer kept float computes in float32 on a core without DSP dot
