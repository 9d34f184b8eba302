"""Extends views.qtfix to True and False: PySide6 6.12's `Signal.emit` drops a reference to True.

Each `emit()` called from Python releases one reference to its boolean result without having
taken it, so after a few hundred emits CPython 3.11 aborts with "bool_dealloc". As for None,
the guard gives both booleans a reference count no program can exhaust (3.12 makes them immortal
itself). It belongs beside the None guard in views/qtfix.py; it lives here until it moves there.
"""

from __future__ import annotations

import ctypes

from views import qtfix

_DONE = False


def apply() -> None:
    """Guard True and False (once per process; a no-op where PySide6 does not leak)."""
    global _DONE
    qtfix.apply()
    if _DONE or not qtfix.needed():
        _DONE = True
        return
    for obj in (True, False):
        # ob_refcnt is the first field of every object in a release build of CPython.
        ctypes.c_ssize_t.from_address(id(obj)).value += 1 << 40
    _DONE = True


apply()
