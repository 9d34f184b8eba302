"""How big one tensor may be: refused before anything is allocated, with a limit users can raise.

A model from a stranger can declare a 4 GiB constant, a padding that makes a 36 GiB activation,
or point at an 8 GiB external file. Kiln targets microcontrollers, where no tensor comes near a
gigabyte, so shape inference and the loader refuse any tensor above the limit, naming the node
and the size, instead of running out of memory later. `KILN_MAX_TENSOR_BYTES` raises (or
lowers) the limit for a session.
"""

from __future__ import annotations

import functools
import os

from compiler.errors import ShapeError

DEFAULT_MAX_TENSOR_BYTES = 1 << 30  # 1 GiB
ENV_VAR = "KILN_MAX_TENSOR_BYTES"


def max_tensor_bytes() -> int:
    """The limit in force: the environment's, when it holds a positive integer, else 1 GiB."""
    return _parse_limit(os.environ.get(ENV_VAR, ""))


@functools.lru_cache(maxsize=8)
def _parse_limit(text: str) -> int:
    """The limit a setting gives (cached: inference asks once per tensor)."""
    text = text.strip()
    try:
        value = int(text) if text else DEFAULT_MAX_TENSOR_BYTES
    except ValueError:
        return DEFAULT_MAX_TENSOR_BYTES
    return value if value > 0 else DEFAULT_MAX_TENSOR_BYTES


def human(nbytes: int) -> str:
    """Bytes in the largest binary unit that keeps a number of at least 1."""
    size = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{nbytes} B"


def check_tensor_bytes(nbytes: int, what: str) -> None:
    """Raise ShapeError when `what` (a tensor described for the user) needs too many bytes."""
    limit = max_tensor_bytes()
    if nbytes > limit:
        raise ShapeError(f"{what} would take {human(nbytes)} ({nbytes:,} bytes), more than "
                         f"the limit of {human(limit)} per tensor; set {ENV_VAR} to allow it")
