"""Lowering passes as recorded, switchable stages, from `kiln passes` to the bundle on a board.

A residual block built here (two int8 convolutions whose second adds the block's input back)
gets every lowering pass: the residual Add in the store, the pair run row by row, streaming.
`kiln passes --target` lists each pass's record; switching the pair off (`--disable-lowering`)
changes the plan `kiln memory` prints, the kernels and the bundle alike, and the firmware
built without it still prints the interpreter's bytes under QEMU. ResNet-8 (MLPerf Tiny) gives
the figures its users know: 25,088 B with the pair, 32,768 B without, 13,120 B as one
row-streamed chain.
"""

from __future__ import annotations

import json

import pytest

from app import cli
from compiler.driver import Options, compilation
from compiler.frontends.load import load_model
from compiler.inputs import random_inputs
from compiler.lowir.ir import Fusion
from compiler.lowir.passes import (
    CONV_PAIR,
    LOWERING_NAMES,
    RESIDUAL_IN_STORE,
    ROW_CHAINS,
    STREAMING_ROWS,
)
from tests.codegen.test_conv_pair import _block_model
from tests.conftest import shared_models
from tests.tflite.writer import write

# The pair's own effect shows with row-streamed chains off: a chain would take the block.
WITHOUT_CHAINS = ["--disable-lowering", ROW_CHAINS]
WITHOUT_PAIR = [*WITHOUT_CHAINS, "--disable-lowering", CONV_PAIR]
NO_PAIR = frozenset({CONV_PAIR, ROW_CHAINS})


@pytest.fixture(scope="module")
def block_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("block") / "block.tflite"
    path.write_bytes(write(_block_model()[0]))
    return path


def _json(capsys, *argv) -> dict:
    assert cli.main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _lowering(capsys, path, target="cortex-m7", *extra) -> dict[str, dict]:
    doc = _json(capsys, "passes", str(path), "--target", target, *extra)
    assert [r["name"] for r in doc["lowering"]] == list(LOWERING_NAMES)
    for before, after in zip(doc["lowering"], doc["lowering"][1:]):
        assert after["arena_before"] == before["arena_after"], "the stages must chain"
    return {r["name"]: r for r in doc["lowering"]}


def test_kiln_passes_records_each_lowering_pass_of_a_residual_block(block_file, capsys):
    records = _lowering(capsys, block_file)
    pair = records[CONV_PAIR]
    assert pair["applied"] and pair["changed"] and pair["reason"] == ""
    assert pair["steered_by"] == {"int8_residual_in_store": True}
    assert len(pair["sites"]) == 1 and "window of 10 rows" in pair["sites"][0]
    assert pair["steps_after"] == pair["steps_before"] - 1  # two kernels became one
    assert pair["arena_after"] < pair["arena_before"]
    residual = records[RESIDUAL_IN_STORE]
    assert residual["applied"] and residual["arena_after"] < residual["arena_before"]
    assert "never stored" in residual["sites"][0]
    memory = _json(capsys, "memory", str(block_file), "--target", "cortex-m7")
    chains = records[ROW_CHAINS]
    assert chains["applied"] and chains["arena_after"] < chains["arena_before"]
    assert chains["arena_after"] == memory["activations"]
    assert "row by row" in chains["sites"][0]
    assert pair["why"] and pair["title"]


def test_helium_forbids_the_pair_and_the_record_says_so(block_file, capsys):
    records = _lowering(capsys, block_file, "cortex-m55")
    pair = records[CONV_PAIR]
    assert not pair["applied"] and not pair["changed"]
    assert pair["reason"] == "cortex-m55's int8_residual_in_store is false"
    assert records[RESIDUAL_IN_STORE]["steered_by"] == {"int8_residual_in_store": False}
    assert records[RESIDUAL_IN_STORE]["sites"] == []  # its Adds are int8: they stay apart


def test_switching_the_pair_off_changes_plan_kernels_and_bundle_alike(block_file, capsys,
                                                                      tmp_path):
    fused = _json(capsys, "memory", str(block_file), "--target", "cortex-m7", *WITHOUT_CHAINS)
    plain = _json(capsys, "memory", str(block_file), "--target", "cortex-m7", *WITHOUT_PAIR)
    assert plain["activations"] > fused["activations"]
    records = _lowering(capsys, block_file, "cortex-m7", *WITHOUT_PAIR)
    assert records[CONV_PAIR]["reason"] == "switched off"
    assert records[CONV_PAIR]["arena_after"] == records[CONV_PAIR]["arena_before"]
    assert records[STREAMING_ROWS]["arena_after"] == plain["activations"]
    out = tmp_path / "bundle"
    assert cli.main(["compile", str(block_file), "--target", "cortex-m7", "-o", str(out),
                     *WITHOUT_PAIR, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["regions"]["activations"] == plain["activations"]
    options = Options("cortex-m7", disabled_lowering=NO_PAIR)
    kernels = compilation(load_model(block_file)).net(options).kernels
    assert not any(k.fusion is Fusion.CONV_PAIR for k in kernels)
    assert any(k.fusion is Fusion.RESIDUAL_ADD for k in kernels)


def test_an_unknown_lowering_pass_is_one_line_naming_the_known_ones(block_file, capsys):
    assert cli.main(["memory", str(block_file), "--disable-lowering", "pair"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "unknown lowering pass 'pair'" in err and CONV_PAIR in err


def _exact_on_m7(graph, options: Options, tmp_path, seeds=2) -> None:
    from tests.codegen import firmware

    firmware.require_tools()
    compiled = compilation(graph)
    net = compiled.net(options)
    for seed in range(seeds):
        feeds = random_inputs(compiled.prepared, seed)
        firmware.assert_exact(net, compiled.prepared, feeds, "mps2-an500",
                              tmp_path / f"seed{seed}", f"seed {seed}")


def test_the_block_without_its_pair_runs_exactly_on_cortex_m7(block_file, tmp_path):
    options = Options("cortex-m7", disabled_lowering=NO_PAIR)
    _exact_on_m7(load_model(block_file), options, tmp_path)


def test_instruction_counts_per_lowering_pass_under_qemu(block_file, capsys):
    from tests.codegen import firmware

    firmware.require_tools()
    doc = _json(capsys, "passes", str(block_file), "--target", "cortex-m7", "--instructions")
    records = {r["name"]: r for r in doc["lowering"]}
    for record in doc["lowering"]:
        assert record["instructions_before"] > 0 and record["instructions_after"] > 0
        if not record["changed"]:
            assert record["instructions_after"] == record["instructions_before"]
    # Fusing the Add into the store saves a tensor of arena for at most 1 % of instructions
    # (its own pass over the tensor saved, the convolution's registers shared with the Add).
    residual = records[RESIDUAL_IN_STORE]
    assert residual["arena_after"] < residual["arena_before"]
    assert residual["instructions_after"] <= 1.01 * residual["instructions_before"]
    # The block as one row-streamed chain: fewer instructions than the pair it replaces.
    chains = records[ROW_CHAINS]
    assert chains["instructions_after"] < chains["instructions_before"]


@pytest.mark.slow
def test_resnet8_pair_fusion_switched_off_from_25088_bytes_and_still_exact(capsys, tmp_path):
    path = shared_models() / "onnx" / "pretrainedResnet_quant.onnx"
    records = _lowering(capsys, path)
    assert records[STREAMING_ROWS]["arena_after"] == 25088
    assert records[CONV_PAIR]["sites"] and records[CONV_PAIR]["applied"]
    assert records[ROW_CHAINS]["arena_after"] == 13120  # the whole net as one chain
    without = _lowering(capsys, path, "cortex-m7", *WITHOUT_PAIR)
    unfused = _json(capsys, "memory", str(path), "--target", "cortex-m7", *WITHOUT_PAIR)
    assert without[STREAMING_ROWS]["arena_after"] == unfused["activations"] == 32768
    options = Options("cortex-m7", disabled_lowering=NO_PAIR)
    _exact_on_m7(load_model(path), options, tmp_path, seeds=1)
