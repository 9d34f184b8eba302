"""Model files on disk: read with one-line errors, written atomically.

A crash or a full disk never leaves a half-written model behind.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from compiler.errors import ModelError


def model_source(source, label: str | None, limit: int, why: str
                 ) -> tuple[str, bytes, Path | None]:
    """(label, bytes, path) of a model given as raw bytes or as a file path.

    The label defaults to the file's name ("<bytes>" for raw bytes); the path is None for
    bytes. A file is read by `read_model_file`.
    """
    if isinstance(source, (bytes, bytearray)):
        return label or "<bytes>", bytes(source), None
    path = Path(source)
    label = label or path.name
    return label, read_model_file(path, label, limit, why), path


def read_model_file(path: Path, label: str, limit: int, why: str) -> bytes:
    """The bytes of a model file, or a ModelError naming `label` (`why` explains `limit`)."""
    if not path.exists():
        raise ModelError("no such file", file=label)
    if not path.is_file():
        raise ModelError("not a regular file", file=label)
    if path.stat().st_size > limit:
        raise ModelError(f"the file is larger than 2 GiB, {why}", file=label)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ModelError(f"cannot read the file ({exc.strerror})", file=label) from None


def _mode_for(target: Path) -> int:
    """The permission bits for `target`: those of the file it replaces, else 0o666 less umask.

    That is what `open()` gives a new file. The temporary file `mkstemp` makes is private
    (0600); renamed over as it is, a saved model would stop being readable by others.
    """
    try:
        return target.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to a temporary file beside `path`, flush it to disk, then rename it over."""
    target = Path(path)
    mode = _mode_for(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """`atomic_write_bytes` of `text` in UTF-8."""
    atomic_write_bytes(path, text.encode("utf-8"))
