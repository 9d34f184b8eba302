"""One model compiles to the same code in every process: no order comes from hashing names.

Python salts string hashes per process, so iterating a set of tensor names gives another order
each run. A row chain's windows were such a set: the entry point passed its operands in another
order each time, and its instruction count under QEMU moved by a few from run to run.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import shared_models

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import hashlib, sys
from compiler.driver import Options, compilation
from compiler.frontends.load import load_model
net = compilation(load_model(sys.argv[1])).net(Options(sys.argv[2]))
print(hashlib.sha256(net.llvm_ir.encode()).hexdigest(), hashlib.sha256(net.object).hexdigest())
"""


def _digest(model: Path, target: str, seed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(model), target], env=env,
                          cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_a_row_chain_compiles_alike_under_any_hash_seed():
    model = shared_models() / "onnx" / "pretrainedResnet_quant.onnx"
    first = _digest(model, "cortex-m7", "1")
    assert first == _digest(model, "cortex-m7", "2") == _digest(model, "cortex-m7", "3")
    assert len(first.split()) == 2 and hashlib.sha256(b"").hexdigest() not in first


def test_the_sample_compiles_alike_under_any_hash_seed():
    from tests.conftest import SAMPLE_MODEL

    for target in ("cortex-m7", "host"):
        assert _digest(SAMPLE_MODEL, target, "1") == _digest(SAMPLE_MODEL, target, "2")
