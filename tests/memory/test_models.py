"""Acceptance on real models: valid plans, efficiency, and RAM against TFLite Micro."""

from __future__ import annotations

from functools import lru_cache

import pytest

from compiler.frontends.onnx import load_onnx
from compiler.memory.report import check_memory, plan_memory
from compiler.memory.simulate import simulate
from compiler.passes import run_pipeline
from tests.test_real_models import LIGHT, LIGHT_DIR, SHARED_ONNX, _model_path

# TFLite Micro's non-persistent arena (activations, inputs and outputs) measured with the
# tflite-micro interpreter on the MLPerf Tiny originals, and the ratio Kiln must reach.
# Kiln's arena with inputs and outputs in it (as TFLite Micro's head arena holds them) against
# TFLite Micro's, at most this fraction (the int8 conv nets run as row-streamed chains: 0.40,
# and 0.45 for VWW, whose 27,648 B input alone is 0.375).
TFLM_ARENA = {"vww_96_float": (294_912, 0.8), "pretrainedResnet": (196_608, 0.8),
              "ad01_fp32": (3_072, 1.0), "kws_ref_model": (16_000, 0.40),
              "vww_96_int8": (73_728, 0.45), "pretrainedResnet_quant": (49_152, 0.40),
              "ad01_int8": (768, 1.0)}
INT8_CONV_NETS = ["kws_ref_model", "pretrainedResnet_quant", "vww_96_int8"]
MIN_EFFICIENCY = 0.98


@lru_cache(maxsize=4)
def _final(path: str):
    return run_pipeline(load_onnx(path), snapshots=False).graph


def _check(path, io_in_arena: bool):
    plan = plan_memory(_final(str(path)), io_in_arena=io_in_arena)
    check_memory(plan)
    simulate(plan)
    assert plan.arena.efficiency >= MIN_EFFICIENCY, plan.arena.strategies
    assert plan.schedule.peak <= plan.schedule.topological_peak
    return plan


@pytest.mark.parametrize("io_in_arena", [False, True])
@pytest.mark.parametrize("name", SHARED_ONNX)
def test_shared_models_get_valid_efficient_plans(name, io_in_arena):
    _check(_model_path(name), io_in_arena)


@pytest.mark.parametrize("name", LIGHT)
def test_light_models_get_valid_efficient_plans(name):
    for io_in_arena in (False, True):
        _check(LIGHT_DIR / f"{name}.onnx", io_in_arena)


@pytest.mark.parametrize("name", sorted(TFLM_ARENA))
def test_arena_beats_tflite_micro(name):
    tflm, ratio = TFLM_ARENA[name]
    plan = _check(_model_path(name), io_in_arena=True)
    assert plan.arena.size <= ratio * tflm, f"{plan.arena.size / tflm:.3f} of TFLite Micro"


@pytest.mark.parametrize("target", ["host", "cortex-m7", "cortex-m55"])
@pytest.mark.parametrize("name", INT8_CONV_NETS)
def test_the_tflite_int8_nets_reach_their_ratio_on_every_core(name, target):
    """The .tflite originals too, as `kiln memory X --io-in-arena --target T` plans them:
    checked (by `check_plan` and by the brute-force checker), simulated row by row, at most
    the ratio of TFLite Micro's arena."""
    from compiler.driver import Options, compilation
    from compiler.frontends.load import load_model
    from tests.conftest import shared_models
    from tests.memory.test_independent_check import brute_force_valid

    tflm, ratio = TFLM_ARENA[name]
    compiled = compilation(load_model(shared_models() / "tflite" / f"{name}.tflite"))
    plan = compiled.plan(Options(target, io_in_arena=True))
    check_memory(plan)
    simulate(plan)
    a = plan.arena
    assert brute_force_valid(a.buffers, a.offsets, a.size, a.alignment)
    assert plan.lowir.chains and plan.whole_tensor_bound > a.lower_bound
    assert a.size <= ratio * tflm, f"{a.size / tflm:.3f} of TFLite Micro"
