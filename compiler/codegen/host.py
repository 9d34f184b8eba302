"""Run a host-compiled network: link its object into a shared library and call it via ctypes."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from compiler.codegen.build import CompiledNet
from compiler.errors import KilnError

# Regions are over-allocated by this much so their start can be moved to the plan's alignment.
_SLACK = 256


def _aligned(size: int, alignment: int) -> np.ndarray:
    """A zeroed byte buffer of `size` starting on an `alignment` boundary."""
    raw = np.zeros(size + alignment + _SLACK, np.uint8)
    start = -raw.ctypes.data % alignment
    return raw[start:start + max(size, 1)]


class HostNet:
    """A compiled network loaded into this process.

    The shared library lives in a private temporary folder that `close` (or garbage collection
    of the folder object) removes; the regions are numpy buffers reused across calls.
    """

    def __init__(self, net: CompiledNet, cc: str | None = None):
        cc = cc or shutil.which("cc")
        if cc is None:
            raise KilnError("running on the host needs a C compiler (cc) to link the object")
        self.net = net
        self._dir = tempfile.TemporaryDirectory(prefix="kiln-")
        folder = Path(self._dir.name)
        (folder / f"{net.name}.o").write_bytes(net.object)
        lib = folder / f"lib{net.name}.so"
        done = subprocess.run([cc, "-shared", "-o", str(lib), str(folder / f"{net.name}.o"),
                               "-lm"], capture_output=True, text=True)
        if done.returncode:
            raise KilnError(f"linking {net.name}.o failed: {done.stderr.strip()}")
        self._lib = ctypes.CDLL(str(lib))
        self._fn = getattr(self._lib, net.name)
        self._fn.restype = ctypes.c_int
        self._fn.argtypes = [ctypes.c_void_p] * 3
        align = net.plan.alignment
        self.regions = {"mutable": _aligned(net.plan.mutable, align),
                        "activations": _aligned(net.plan.arena.size, align)}

    def _view(self, tensor) -> np.ndarray:
        nbytes = int(np.prod(tensor.shape, dtype=np.int64)) * np.dtype(tensor.dtype).itemsize
        raw = self.regions[tensor.region][tensor.offset:tensor.offset + nbytes]
        return raw.view(tensor.dtype).reshape(tensor.shape)

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Outputs by name for inputs by name (shapes and element types must match)."""
        for tensor in self.net.inputs:
            if tensor.name not in feeds:
                raise KilnError(f"input {tensor.name} is missing")
            self._view(tensor)[...] = np.asarray(feeds[tensor.name], tensor.dtype).reshape(
                tensor.shape)
        status = self._fn(None, self.regions["mutable"].ctypes.data,
                          self.regions["activations"].ctypes.data)
        if status:
            raise KilnError(f"{self.net.name} returned {status}")
        return {t.name: self._view(t).copy() for t in self.net.outputs}

    def close(self) -> None:
        """Remove the temporary library (the loaded copy stays mapped until exit)."""
        self._dir.cleanup()
