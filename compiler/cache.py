"""Kiln's cache folder, and the objects compiled from LLVM IR kept there between runs.

The same IR, target and LLVM version always give the same object bytes, so an object can be
looked up by the hash of all of them instead of being compiled again: a second `kiln profile`,
`kiln compile` or GUI export of the same network skips LLVM's optimizer and code generator.
Entries are written atomically; the oldest go when the folder passes its size limit.
Setting KILN_NO_CACHE=1 turns the object cache off (to measure cold compiles).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

OBJECT_CACHE_LIMIT = 256 * 1024 * 1024  # bytes of objects kept


def cache_dir() -> Path:
    """Where built tools and compiled objects are kept between runs."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kiln"


def _objects() -> Path:
    return cache_dir() / "objects"


def cached_object(key: str, text: str, build: Callable[[], bytes]) -> bytes:
    """The object for IR `text` under `key` (target, level, LLVM version), built on a miss."""
    if os.environ.get("KILN_NO_CACHE"):
        return build()
    digest = hashlib.sha256(key.encode() + b"\0" + text.encode()).hexdigest()
    path = _objects() / f"{digest}.o"
    try:
        data = path.read_bytes()
        os.utime(path)  # recently used: pruned last
        return data
    except OSError:
        pass
    data = build()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=path.parent, suffix=".part")
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(temp, path)
        _prune(path.parent)
    except OSError:
        pass  # a read-only or full disk only costs the next compile its time
    return data


def _prune(folder: Path) -> None:
    """Remove the least recently used objects beyond the size limit."""
    entries = []
    for path in folder.glob("*.o"):
        try:
            stat = path.stat()
        except OSError:
            continue
        entries.append((stat.st_mtime, stat.st_size, path))
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries):
        if total <= OBJECT_CACHE_LIMIT:
            break
        path.unlink(missing_ok=True)
        total -= size
