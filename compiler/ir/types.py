"""Element types, quantization parameters and tensor types of graph values."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

# Element types Kiln handles, keyed by numpy name; the value is the ONNX TensorProto enum.
# Names (not numpy dtypes) are what the IR stores, so types print, hash and serialize plainly.
ONNX_ELEM_TYPES: dict[str, int] = {
    "float32": 1,
    "uint8": 2,
    "int8": 3,
    "uint16": 4,
    "int16": 5,
    "int32": 6,
    "int64": 7,
    "bool": 9,
    "float16": 10,
    "float64": 11,
    "uint32": 12,
    "uint64": 13,
}
DTYPE_OF_ONNX: dict[int, str] = {v: k for k, v in ONNX_ELEM_TYPES.items()}

# Tensors larger than this are refused before anything is allocated (ONNX's own limit for
# protobuf-backed tensors, and far beyond any microcontroller).
MAX_ELEMENTS = 2**31


@functools.lru_cache(maxsize=64)
def dtype_name(dtype: np.dtype | str | type) -> str:
    """Return Kiln's element type name for a numpy dtype, refusing types Kiln does not handle.

    Cached: every constant and value asks, and numpy builds the name anew each time.
    """
    name = np.dtype(dtype).name
    if name not in ONNX_ELEM_TYPES:
        raise TypeError(f"element type {name} is not supported")
    return name


def is_float(dtype: str) -> bool:
    """True for floating-point element types."""
    return dtype in ("float16", "float32", "float64")


@dataclass(frozen=True)
class QuantParams:
    """Affine quantization: real = scale * (q - zero_point), per tensor or per axis."""

    scale: tuple[float, ...]
    zero_point: tuple[int, ...]
    axis: int | None = None

    @classmethod
    def from_arrays(cls, scale: np.ndarray, zero_point: np.ndarray | None, axis: int | None):
        """Build from the (scalar or 1-D) arrays of a QuantizeLinear / DequantizeLinear node."""
        s = tuple(float(v) for v in np.asarray(scale).reshape(-1))
        zp = (0,) * len(s) if zero_point is None else tuple(
            int(v) for v in np.asarray(zero_point).reshape(-1))
        return cls(s, zp, axis if len(s) > 1 else None)

    def __str__(self) -> str:
        if len(self.scale) == 1:
            return f"scale={self.scale[0]:.6g}, zp={self.zero_point[0]}"
        return f"per-axis {self.axis}: {len(self.scale)} scales"


_ITEMSIZE: dict[str, int] = {}  # np.dtype() costs a microsecond; inference asks per node


@dataclass(frozen=True)
class TensorType:
    """Static shape, element type and optional quantization of one tensor."""

    shape: tuple[int, ...]
    dtype: str = "float32"
    quant: QuantParams | None = None

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(map(int, self.shape)))

    @property
    def rank(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def numel(self) -> int:
        """Number of elements (1 for a scalar)."""
        return math.prod(self.shape)  # exact, and far cheaper than numpy for a few dims

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        size = _ITEMSIZE.get(self.dtype)
        if size is None:
            size = _ITEMSIZE[self.dtype] = np.dtype(self.dtype).itemsize
        return size

    @property
    def nbytes(self) -> int:
        """Bytes the tensor occupies, densely packed."""
        return self.numel * self.itemsize

    def with_shape(self, shape) -> TensorType:
        """Same element type, another shape (quantization kept only when per-tensor)."""
        quant = self.quant if self.quant is None or self.quant.axis is None else None
        return TensorType(tuple(shape), self.dtype, quant)

    def with_dtype(self, dtype: str) -> TensorType:
        """Same shape, another element type (quantization dropped)."""
        return TensorType(self.shape, dtype)

    def __str__(self) -> str:
        text = f"{self.dtype}[{','.join(str(d) for d in self.shape)}]"
        return f"{text}{{{self.quant}}}" if self.quant else text

    @classmethod
    def of(cls, array: np.ndarray) -> TensorType:
        """Type of a numpy array."""
        return cls(array.shape, dtype_name(array.dtype))
