"""Guard against PySide6 6.12 on CPython 3.11 releasing references it does not own.

PySide6/shiboken6 6.12.0 drops one reference to `None` on every call of a Qt method that
returns void (and on every Python override Qt calls, like `paint`), and one reference to `True`
on every signal emission. 6.11.3 does not; CPython 3.12+ never notices because these singletons
are immortal there. On 3.11 a count reaches zero after a few thousand calls (one repaint of a
big graph, a thousand signals) and the interpreter aborts with "none_dealloc" or
"bool_dealloc". The cure is another PySide6 (pin `PySide6-Essentials!=6.12.0`); until then
this module makes the three singletons immortal the way 3.12 does, by giving each a reference
count no program can exhaust.
"""

from __future__ import annotations

import ctypes
import sys

_DONE = False


def needed() -> bool:
    """True on the combination that leaks: CPython < 3.12 with shiboken6 6.12 or later."""
    if sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return False
    import shiboken6

    return tuple(shiboken6.__version_info__[:2]) >= (6, 12)


def apply() -> None:
    """Make None, True and False immortal in practice (once; a no-op where not needed)."""
    global _DONE
    if not _DONE and needed():
        for singleton in (None, True, False):
            # ob_refcnt is the first field of every object in a release build of CPython.
            ctypes.c_ssize_t.from_address(id(singleton)).value += 1 << 40
    _DONE = True


apply()
