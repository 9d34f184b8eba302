"""`kiln bench --target`: a model's executed instructions on an emulated Cortex-M, per layer.

The model goes through the same compile driver as every other command; the network is built
twice (as shipped, and with separate kernels for the per-layer split) and run under QEMU with
the counting plugin on seeded random inputs. Counts are deterministic, so they serve as bench
figures and as regression bounds in tests.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from compiler.driver import Options, compilation
from compiler.errors import KilnError
from compiler.frontends.load import load_model
from compiler.inputs import random_inputs
from compiler.mcu import firmware
from compiler.mcu.counting import NetCount, count_net

BENCH_TARGETS = tuple(sorted(t for t in firmware.BOARD_OF_TARGET if t != "cortex-m3"))


def bench_target(model: str | Path, target: str, seed: int = 0,
                 shapes: dict | None = None) -> NetCount:
    """Compile `model` for `target` and count one inference on its QEMU board."""
    missing = firmware.missing_tools()
    if missing:
        raise KilnError(f"kiln bench --target needs {' and '.join(missing)} (Debian packages: "
                        f"{firmware.PACKAGES})")
    board = firmware.board_for(target)
    compiled = compilation(load_model(model, shapes or {}))
    feeds = random_inputs(compiled.prepared, seed)
    shipped = compiled.net(Options(target))
    separate = compiled.net(Options(target, separate_kernels=True))
    with tempfile.TemporaryDirectory(prefix="kiln-bench-") as folder:
        return count_net(shipped, separate, feeds, Path(folder) / board.machine)
