"""Instructions per MAC against the core's product bound: `kiln bench --target --json` and the
report, with each layer's MACs counted here from its shapes, independently of Kiln's stats."""

from __future__ import annotations

import json

from app.cli import main
from compiler.mcu import firmware
from tests.tuning.models import TINY_PLAN, tiny_dscnn


def _macs_by_shape(size=(10, 6), cin=8, units=8) -> list[int]:
    """MACs of the tiny model's weighted layers in order, from its plan (SAME padding)."""
    h, w = size
    macs, channels = [], cin
    for kind, out in TINY_PLAN:
        if kind == "conv3":
            macs.append(h * w * 9 * channels * out)
            channels = out
        elif kind == "conv1":
            macs.append(h * w * channels * out)
            channels = out
        else:
            macs.append(h * w * 9 * channels)
    return macs + [channels * units]


def test_bench_gives_each_layers_instructions_per_mac_and_the_bound(tmp_path, capsys):
    assert not firmware.missing_tools()
    model = tiny_dscnn(tmp_path)
    assert main(["bench", str(model), "--target", "cortex-m7", "--no-peer", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["bound_instructions_per_mac"] == 0.5  # SMLAD: two products an instruction
    weighted = [la for la in doc["layers"] if la["macs"]]
    assert [la["macs"] for la in weighted] == _macs_by_shape()  # one row a layer, in order
    for layer in weighted:
        assert abs(layer["instructions_per_mac"] - layer["instructions"] / layer["macs"]) < 1e-3
        assert layer["instructions_per_mac"] > doc["bound_instructions_per_mac"]
    assert main(["bench", str(model), "--target", "cortex-m55", "--no-peer", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bound_instructions_per_mac"] == 1 / 16
