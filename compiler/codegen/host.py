"""Run a host-compiled network: load its object into this process and call it via ctypes.

The object is loaded by LLVM's own loader (no C compiler needed); given a C compiler, it is
linked into a shared library instead, the way a user's program would link it.

`HostNet(net)` runs a `CompiledNet` in memory; `HostNet.from_bundle(folder)` runs a written
bundle from its files alone (NET.o, NET.report.json, NET.weights.bin), the way a user's program
would, so a bundle can be checked without the compiler state that produced it.
"""

from __future__ import annotations

import ctypes
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from compiler.codegen.build import CompiledNet, Tensor
from compiler.codegen.inprocess import LoadedObject
from compiler.codegen.targets import Target, get_target, missing_on_this_cpu
from compiler.codegen.weights import WEIGHT_ALIGNMENT
from compiler.errors import KilnError

# Regions are over-allocated by this much so their start can be moved to the plan's alignment.
_SLACK = 256
_REGIONS = ("mutable", "activations")
# The entry point: int NAME(const void *constant, void *mutable, void *activations).
_ENTRY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
_RESET = ctypes.CFUNCTYPE(None, ctypes.c_void_p)  # NAME_reset_state(mutable)


def _aligned(size: int, alignment: int) -> np.ndarray:
    """A zeroed byte buffer of `size` starting on an `alignment` boundary."""
    raw = np.zeros(size + alignment + _SLACK, np.uint8)
    start = -raw.ctypes.data % alignment
    return raw[start:start + max(size, 1)]


def _check_cpu(target: Target, label: str) -> None:
    """Refuse code for an x86 level this CPU lacks, before it could stop on an instruction."""
    missing = missing_on_this_cpu(target)
    if missing:
        raise KilnError(f"{label} is compiled for {target.name}, which needs "
                        f"{', '.join(missing)}; this CPU lacks them (compile it for host)")


def _link(obj: Path, name: str, folder: Path, cc: str) -> Path:
    """`obj` linked into a shared library in `folder` with the C compiler `cc`."""
    if shutil.which(cc) is None:
        raise KilnError(f"the C compiler {cc} is not installed")
    lib = folder / f"lib{name}.so"
    done = subprocess.run([cc, "-shared", "-o", str(lib), str(obj), "-lm"],
                          capture_output=True, text=True)
    if done.returncode:
        raise KilnError(f"linking {obj.name} failed: {done.stderr.strip()}")
    return lib


class HostNet:
    """A compiled network loaded into this process.

    By default LLVM loads the object into this process (its code is freed with the HostNet);
    with `cc` (a C compiler's name) the object is linked into a shared library in a private
    temporary folder that `close` removes. The regions are numpy buffers reused across calls.

    Attributes:
        name: Entry point name.
        net: The CompiledNet, or None when loaded from a bundle.
        inputs, outputs: Where each graph input and output lives.
        regions: "constant" (external weights only), "mutable" and "activations" buffers.
    """

    def __init__(self, net: CompiledNet, cc: str | None = None):
        _check_cpu(net.target, f"network {net.name}")
        self._dir = tempfile.TemporaryDirectory(prefix="kiln-")
        obj = Path(self._dir.name) / f"{net.name}.o"
        self.net: CompiledNet | None = net
        if cc is not None:  # a C compiler links a file; LLVM loads the bytes in memory
            obj.write_bytes(net.object)
        self._load(net.name, obj, net.object, cc, net.inputs, net.outputs, net.plan.alignment,
                   {"mutable": net.plan.mutable, "activations": net.plan.arena.size},
                   net.constant if net.weights == "external" else None,
                   {slot.input.name for slot in net.state},
                   net.ticks_symbol if net.timed else None)

    @classmethod
    def from_bundle(cls, folder: str | Path, name: str | None = None,
                    cc: str | None = None) -> HostNet:
        """A runner built only from the files of a bundle written for the host."""
        folder = Path(folder)
        if name is None:
            reports = sorted(folder.glob("*.report.json"))
            if len(reports) != 1:
                raise KilnError(f"{folder} holds {len(reports)} bundle reports; name the network")
            name = reports[0].name[:-len(".report.json")]
        report_path = folder / f"{name}.report.json"
        try:
            report = json.loads(report_path.read_text())
            regions = report["regions"]
            sizes = {r: int(regions[r]) for r in _REGIONS}
            alignment, external = int(regions["alignment"]), report["weights"] == "external"
            if report["weights"] not in ("embedded", "external"):
                raise ValueError(f"weights is {report['weights']!r}")
            inputs = [_tensor(t) for t in report["inputs"]]
            outputs = [_tensor(t) for t in report["outputs"]]
            state = {str(v["input"]) for v in report.get("state", ())}
        except OSError as e:
            raise KilnError(f"cannot read {report_path}: {e.strerror}") from None
        except KeyError as e:
            raise KilnError(f"{report_path} is not a Kiln bundle report: no {e} entry") from None
        except (ValueError, TypeError) as e:
            raise KilnError(f"{report_path} is not a Kiln bundle report: {e}") from None
        _check_fits(inputs + outputs, sizes, report_path)
        try:
            target = get_target(str(report.get("target", "host")))
        except KilnError:
            target = None  # a target this version does not know: its ELF machine decides
        if target is not None:
            _check_cpu(target, f"{folder / f'{name}.o'}")
        constant = None
        if external:
            blob = folder / f"{name}.weights.bin"
            if not blob.is_file():
                raise KilnError(f"{blob} is missing: the bundle has external weights")
            constant = blob.read_bytes()
            if len(constant) != int(regions["constant"]):
                raise KilnError(f"{blob} holds {len(constant)} bytes, the report says "
                                f"{regions['constant']}")
        if not (folder / f"{name}.o").is_file():
            raise KilnError(f"{folder / f'{name}.o'} is missing")
        self = cls.__new__(cls)
        self._dir = tempfile.TemporaryDirectory(prefix="kiln-")
        self._load(name, folder / f"{name}.o", None, cc, inputs, outputs, alignment, sizes,
                   constant, state)
        self.net = None
        return self

    def _load(self, name: str, obj: Path, data: bytes | None, cc: str | None,
              inputs: list[Tensor], outputs: list[Tensor], alignment: int,
              sizes: dict[str, int], constant: bytes | None, state: set[str],
              ticks: str | None = None) -> None:
        """Load the object (its bytes `data`, else the file `obj`) and allocate the regions.

        With state (names of the state inputs), the regions start from its initial values.
        """
        self.name, self.inputs, self.outputs = name, inputs, outputs
        self.state_inputs = frozenset(state)
        reset = f"{name}_reset_state"
        net = getattr(self, "net", None)
        chains = [c for c, _ in net.chain_timed] if ticks and net is not None else []
        exports = [name, *([reset] if state else []), *([ticks] if ticks else []), *chains]
        self._ticks_address: int | None = None
        self._chain_addresses: dict[str, int] = {}
        if cc is None:
            self._code = LoadedObject(obj.read_bytes() if data is None else data, obj.name,
                                      exports)
            self._fn = _ENTRY(self._code.address(name))
            if ticks:
                self._ticks_address = self._code.address(ticks)
                self._chain_addresses = {c: self._code.address(c) for c in chains}
            self._reset = _RESET(self._code.address(reset)) if state else None
        else:
            self._code = ctypes.CDLL(str(_link(obj, name, Path(self._dir.name), cc)))
            self._fn = getattr(self._code, name)
            if ticks:
                self._ticks_address = ctypes.addressof(ctypes.c_uint64.in_dll(self._code, ticks))
                self._chain_addresses = {c: ctypes.addressof(ctypes.c_uint64.in_dll(self._code, c))
                                         for c in chains}
            self._fn.restype = ctypes.c_int
            self._fn.argtypes = [ctypes.c_void_p] * 3
            self._reset = getattr(self._code, reset) if state else None
            if self._reset is not None:
                self._reset.restype = None
                self._reset.argtypes = [ctypes.c_void_p]
        self.regions = {r: _aligned(sizes[r], alignment) for r in _REGIONS}
        if constant is not None:
            self.regions["constant"] = _aligned(len(constant), max(alignment, WEIGHT_ALIGNMENT))
            self.regions["constant"][:len(constant)] = np.frombuffer(constant, np.uint8)
        # Built once, so that a run costs the copies and the call, not numpy bookkeeping.
        self._in_views = [(t.name, t.dtype, self._view(t)) for t in inputs]
        self._out_views = [(t.name, self._view(t)) for t in outputs]
        base = self.regions.get("constant")
        self._args = (None if base is None else base.ctypes.data,
                      self.regions["mutable"].ctypes.data,
                      self.regions["activations"].ctypes.data)
        self.reset_state()

    def reset_state(self) -> None:
        """Put every state variable back to its initial value (a network without: nothing)."""
        if self._reset is not None:
            self._reset(self.regions["mutable"].ctypes.data)

    def _view(self, tensor: Tensor) -> np.ndarray:
        nbytes = int(np.prod(tensor.shape, dtype=np.int64)) * np.dtype(tensor.dtype).itemsize
        raw = self.regions[tensor.region][tensor.offset:tensor.offset + nbytes]
        return raw.view(tensor.dtype).reshape(tensor.shape)

    def output_views(self) -> dict[str, np.ndarray]:
        """Each output's place in the regions, by name, read in place after `call`.

        No copy: valid until the next call (a profiler copies them into its own batch).
        """
        return dict(self._out_views)

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Outputs by name for inputs by name (shapes and element types must match)."""
        self.set_inputs(feeds)
        self.call()
        return {name: view.copy() for name, view in self._out_views}

    def set_inputs(self, feeds: dict[str, np.ndarray]) -> None:
        """Copy the inputs by name into their places (shapes and element types must match)."""
        for name, dtype, view in self._in_views:
            if name not in feeds:
                if name in self.state_inputs:
                    continue  # kept by the network from the inference before
                raise KilnError(f"input {name} is missing")
            value = np.asarray(feeds[name])
            if value.dtype != dtype or value.shape != view.shape:
                value = np.asarray(value, dtype).reshape(view.shape)
            view[...] = value

    def call(self) -> None:
        """Run the entry point once on the regions as they are (inputs already in place)."""
        status = self._fn(*self._args)
        if status:
            raise KilnError(f"{self.name} returned {status}")

    def ticks(self) -> np.ndarray:
        """A copy of a timed network's counters: per timed call, then the whole entry point.

        They add up over every call since the load (`reset_ticks` starts again).
        """
        if self._ticks_address is None or self.net is None:
            raise KilnError(f"{self.name} was not compiled with timed kernels")
        count = len(self.net.timed) + 1
        return np.array((ctypes.c_uint64 * count).from_address(self._ticks_address),
                        dtype=np.uint64)

    def chain_ticks(self) -> dict[str, np.ndarray]:
        """A copy of each row chain's counters in a timed network: per one-row kernel."""
        slots = dict(self.net.chain_timed) if self.net is not None else {}
        return {c: np.array((ctypes.c_uint64 * len(slots[c])).from_address(a), dtype=np.uint64)
                for c, a in self._chain_addresses.items()}

    def reset_ticks(self) -> None:
        """Zero a timed network's counters (its row chains' too)."""
        if self._ticks_address is not None and self.net is not None:
            ctypes.memset(self._ticks_address, 0, 8 * (len(self.net.timed) + 1))
            slots = dict(self.net.chain_timed)
            for chain, address in self._chain_addresses.items():
                ctypes.memset(address, 0, 8 * len(slots[chain]))

    def close(self) -> None:
        """Remove the temporary files (the loaded code stays until the HostNet is collected)."""
        self._dir.cleanup()


def _tensor(doc: dict) -> Tensor:
    """A Tensor from its report entry."""
    region = doc["region"]
    if region not in _REGIONS:
        raise ValueError(f"unknown region {region!r} of {doc['name']}")
    return Tensor(str(doc["name"]), region, int(doc["offset"]),
                  tuple(int(d) for d in doc["shape"]), np.dtype(str(doc["dtype"])).name)


def _check_fits(tensors: list[Tensor], sizes: dict[str, int], report: Path) -> None:
    """Every input and output lies inside its region (a report from a stranger may lie)."""
    for t in tensors:
        end = t.offset + int(np.prod(t.shape, dtype=np.int64)) * np.dtype(t.dtype).itemsize
        if t.offset < 0 or end > sizes[t.region]:
            raise KilnError(f"{report}: {t.name} ends at byte {end}, outside the {t.region} "
                            f"region of {sizes[t.region]} bytes")
