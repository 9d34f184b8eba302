"""`kiln bench --target`: a model's executed instructions on an emulated Cortex-M, per layer.

The model goes through the same compile driver as every other command; the network is built
twice (as shipped, and with separate kernels for the per-layer split) and run under QEMU with
the counting plugin on seeded random inputs. Beside it, CMSIS-NN runs the same layers with the
same parameters (`cmsis_nn`). Counts are deterministic, so they serve as bench figures and as
regression bounds in tests.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from compiler.driver import Compilation, Options, compilation
from compiler.errors import KilnError
from compiler.frontends.load import load_model
from compiler.inputs import random_inputs
from compiler.mcu import cmsis_nn, firmware
from compiler.mcu.bound import macs_by_name, products_per_instruction
from compiler.mcu.cmsis_nn import PeerCount
from compiler.mcu.counting import NetCount, count_net

BENCH_TARGETS = tuple(t for t in firmware.emulated_targets() if t != "cortex-m3")


@dataclass(frozen=True)
class TargetBench:
    """Kiln's counts for a model on one core and, when its sources were found, CMSIS-NN's.

    `peer_note` says why there is no peer (no sources found).
    """

    kiln: NetCount
    peer: PeerCount | None
    peer_note: str = ""
    macs: dict[str, int] = field(default_factory=dict)  # node name -> multiply-accumulates
    products_per_instruction: int = 1  # the core's best rate (`compiler.mcu.bound`)

    def layer_macs(self, nodes) -> int:
        """Multiply-accumulates of a layer row's nodes."""
        return sum(self.macs.get(n, 0) for n in nodes)

    def per_mac(self, instructions: int, nodes) -> float | None:
        """Instructions per MAC of a layer row (None for a layer without MACs)."""
        macs = self.layer_macs(nodes)
        return instructions / macs if macs else None

    def rows(self) -> list[tuple[str, str, int, int | None]]:
        """Per Kiln kernel: (op, node names, Kiln's instructions, CMSIS-NN's or None)."""
        peer = {layer.node: layer.instructions for layer in (self.peer.layers if self.peer
                                                              else [])}
        rows = []
        for layer in self.kiln.layers:
            theirs = [peer[n] for n in layer.nodes if n in peer]
            rows.append((layer.op, ", ".join(layer.nodes), layer.instructions,
                         sum(theirs) if theirs else None))
        return rows


def bench_target(model: str | Path, target: str, seed: int = 0, shapes: dict | None = None,
                 cmsis_root: str | Path | None = None, peer: bool = True,
                 options: Options | None = None) -> TargetBench:
    """Compile `model` for `target`, count one inference on its QEMU board, and CMSIS-NN's.

    The peer is built from `cmsis_root` (default: `cmsis_nn.find_root`); when that is not
    given and none is found, the result has no peer and says why.
    """
    return bench_compilation(compilation(load_model(model, shapes or {})), target, seed,
                             cmsis_root, peer, options)


def bench_compilation(compiled: Compilation, target: str, seed: int = 0,
                      cmsis_root: str | Path | None = None, peer: bool = True,
                      options: Options | None = None) -> TargetBench:
    """`bench_target` for a graph already in the compile driver (the GUI's export).

    `options` (for `target`) say how to compile, the target's defaults when None.
    """
    missing = firmware.missing_tools()
    if missing:
        raise KilnError(f"counting instructions needs {' and '.join(missing)} (Debian "
                        f"packages: {firmware.PACKAGES})")
    board = firmware.board_for(target)
    feeds = random_inputs(compiled.prepared, seed)
    options = options or Options(target)
    shipped = compiled.net(options)
    separate = compiled.net(replace(options, separate_kernels=True))
    bound = {"macs": macs_by_name(compiled.prepared),
             "products_per_instruction": products_per_instruction(shipped.target)}
    with tempfile.TemporaryDirectory(prefix="kiln-bench-") as folder:
        ours = count_net(shipped, separate, feeds, Path(folder) / board.qemu_machine)
        if not peer:
            return TargetBench(ours, None, "not asked for", **bound)
        try:
            root = cmsis_nn.find_root(cmsis_root)
        except KilnError as exc:
            if cmsis_root is not None:
                raise
            return TargetBench(ours, None, str(exc), **bound)
        theirs = cmsis_nn.count_peer(compiled.prepared, target, Path(folder) / "cmsis-nn",
                                     root)
        if theirs is None:
            return TargetBench(ours, None, "CMSIS-NN computes none of these layers: they "
                               "requantize by onnxruntime's rule, CMSIS-NN by TFLite's (use "
                               "the model's .tflite for a CMSIS-NN comparison)", **bound)
        return TargetBench(ours, theirs, **bound)
