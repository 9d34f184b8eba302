"""The document's quantization: the calibrated session and the choices the user made on it.

The session (`app.quant.session.Session`) holds the profile: the ranges measured on the samples,
the ranges set by hand (`overrides`) and the tensors kept in float; its options hold the
calibration method. The document owns this state as it owns the graph: the undo commands here
are its only writers after a calibration, and the Quantization dock, the export and the session
files follow its signals instead of asking the dock's controller.

The calibration graph (`compiler.quant.profiler.calibration_graph`, the float graph a profile
describes) of each graph is computed once and kept while the graph lives: an edit makes a new
graph, so the key is the graph object itself, and undo finds the old one's again. Workers ask
for it too, hence the lock.
"""

from __future__ import annotations

import copy
import threading
import weakref
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QUndoCommand

from compiler.ir.graph import Graph
from compiler.quant.profile import graph_hash
from compiler.quant.profiler import calibration_graph
from compiler.quant.recipe import QuantRecipe, quantize_with

if TYPE_CHECKING:  # the session's module reads samples and builds evaluators: not needed here
    from app.quant.session import Edits, Session


# A float graph's content hash, computed once per graph (an edit makes a new graph).
_MODEL_HASHES: weakref.WeakKeyDictionary[Graph, str] = weakref.WeakKeyDictionary()
_HASH_LOCK = threading.Lock()


def model_hash(graph: Graph) -> str:
    """`graph_hash` of a document's graph, computed once per graph (any thread)."""
    with _HASH_LOCK:
        known = _MODEL_HASHES.get(graph)
    if known is None:
        known = graph_hash(graph)
        with _HASH_LOCK:
            _MODEL_HASHES[graph] = known
    return known


def session_recipe(session: Session) -> QuantRecipe:
    """The recipe of `session` as it is now: its profile copied, its choices and corrections."""
    o = session.options
    return QuantRecipe.of_profile(session.profile, model_hash(session.graph), method=o.method,
                                  percentile=o.percentile, schema=o.schema,
                                  requant=o.requant, per_channel=o.per_channel,
                                  keep_float=o.keep_float, float_weights=o.float_weights,
                                  corrections=session.corrections)


class RangeCommand(QUndoCommand):
    """One tensor's range edit (None: back to the calibration method's range)."""

    def __init__(self, state: QuantState, tensor: str, before, after, text: str):
        super().__init__(text)
        self.state, self.tensor, self.before, self.after = state, tensor, before, after

    def redo(self) -> None:  # noqa: D102 (Qt override)
        self.state.set_override(self.tensor, self.after)

    def undo(self) -> None:  # noqa: D102 (Qt override)
        self.state.set_override(self.tensor, self.before)


class KeepFloatCommand(QUndoCommand):
    """Leave a tensor in float, or quantize it again."""

    def __init__(self, state: QuantState, tensor: str, keep: bool):
        super().__init__(f"{'Keep' if keep else 'Quantize'} {tensor} {'float' if keep else ''}")
        self.state, self.tensor, self.keep = state, tensor, keep

    def redo(self) -> None:  # noqa: D102 (Qt override)
        self.state.set_keep_float(self.tensor, self.keep)

    def undo(self) -> None:  # noqa: D102 (Qt override)
        self.state.set_keep_float(self.tensor, not self.keep)


class SessionCommand(QUndoCommand):
    """Another session as a whole (an exploration point applied); undo brings the last back."""

    def __init__(self, state: QuantState, before, after, text: str):
        super().__init__(text)
        self.state, self.before, self.after = state, before, after

    def redo(self) -> None:  # noqa: D102 (Qt override)
        self.state.set_session(self.after, measured=True)

    def undo(self) -> None:  # noqa: D102 (Qt override)
        self.state.set_session(self.before, measured=self.before is not None)


class QuantState(QObject):
    """The quantization of the document's graph, and the commands that change it.

    Signals:
        sessionChanged(bool): another session is current (None after another model opened);
            True when it was just measured (a calibration, a loaded profile, a restored
            session), False when it was carried to an edited graph or evaluated again.
        edited(str): the range of that tensor, or whether it stays float, changed.
        replaced(str): the user made another session current as a whole (an exploration
            point applied; the text is its undo step's): the Quantization dock shows it.
        restoringChanged(str): a session file's quantization is being rebuilt (the text says
            so, "" once it is current or given up): `restoring`.
    """

    sessionChanged = Signal(bool)
    edited = Signal(str)
    replaced = Signal(str)
    restoringChanged = Signal(str)

    def __init__(self, document):
        # The document is the parent, asked for with `parent()`: an attribute holding it would
        # make a reference cycle of a Qt parent and child, which the garbage collector frees
        # in an order that crashes the binding.
        super().__init__(document)
        self.session: Session | None = None
        # What a session file's quantization being rebuilt is ("" when none is): the dock
        # says it instead of "Not calibrated", the autosave waits for it.
        self.restoring = ""
        self._bases: weakref.WeakKeyDictionary[Graph, dict[bool, Graph]] = \
            weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    # -- the calibration graph ------------------------------------------------------------------

    def calibration_graph(self, graph: Graph, equalized: bool = False) -> Graph:
        """The calibration graph of `graph`: computed on the first call, then kept (any thread)."""
        with self._lock:
            known = self._bases.get(graph, {}).get(equalized)
        if known is None:
            known = calibration_graph(graph, equalized)
            with self._lock:
                known = self._bases.setdefault(graph, {}).setdefault(equalized, known)
        return known

    # -- the session ----------------------------------------------------------------------------

    def set_session(self, session: Session | None, measured: bool = False) -> None:
        """Make `session` current (None: nothing is calibrated); a restore under way is over."""
        self.session = session
        self.set_restoring("")
        self.sessionChanged.emit(measured)

    def set_restoring(self, text: str) -> None:
        """Say that a session's quantization is being rebuilt (`text`), or no longer ("")."""
        if text != self.restoring:
            self.restoring = text
            self.restoringChanged.emit(text)

    def current(self) -> Session | None:
        """The session, if it describes the document's graph as it is now."""
        s = self.session
        return s if s is not None and s.graph is self.parent().graph else None

    def edits(self) -> Edits:
        """The hand-tuned ranges and float tensors as they are now (a copy a worker may keep)."""
        profile = self.session.profile
        return copy.deepcopy(profile.overrides), tuple(profile.keep_float)

    def recipe(self) -> QuantRecipe | None:
        """The recipe of the document as calibrated and tuned, or None (a snapshot: cheap).

        Everything the integer graph depends on: the profile with its hand-set ranges and
        float tensors, the method and schema, and what an applied exploration point chose
        for the weights (per channel or not, layers in float, bias corrections).
        """
        s = self.current()
        return None if s is None else session_recipe(s)

    def quantized(self) -> Graph | None:
        """The QDQ graph the recipe makes (for a worker or a test: it runs the quantizer)."""
        recipe = self.recipe()
        return None if recipe is None else quantize_with(self.current().graph, recipe)

    # -- edits: each one undo step ----------------------------------------------------------------

    def set_range(self, tensor: str, low: float, high: float) -> bool:
        """Quantize `tensor` over [low, high] from now on (one undo step); False if no change."""
        s = self.session
        if s is None or tensor not in s.profile.tensors or not low < high:
            return False
        before = s.profile.overrides.get(tensor)
        after = {"min": float(low), "max": float(high)}
        if before == after:
            return False
        self.parent().undo_stack.push(RangeCommand(self, tensor, copy.copy(before), after,
                                                    f"Range of {tensor}"))
        return True

    def keep_float(self, tensor: str, keep: bool) -> bool:
        """Leave `tensor` in float, or not (one undo step); False if no change."""
        s = self.session
        if s is None or tensor not in s.profile.tensors:
            return False  # unprofiled tensors stay float anyway
        if (tensor in s.profile.keep_float) == keep:
            return False
        self.parent().undo_stack.push(KeepFloatCommand(self, tensor, keep))
        return True

    def replace_session(self, session: Session, text: str) -> None:
        """Make `session` current as one undo step (undo restores the session before it)."""
        self.parent().undo_stack.push(SessionCommand(self, self.session, session, text))
        self.replaced.emit(text)

    def set_override(self, tensor: str, override: dict | None) -> None:
        """Set (or clear) a hand-tuned range (for the commands)."""
        s = self.session
        if s is None or tensor not in s.profile.tensors:
            return  # measured again since, without this tensor
        if override is None:
            s.profile.overrides.pop(tensor, None)
        else:
            s.profile.overrides[tensor] = dict(override)
        self.edited.emit(tensor)

    def set_keep_float(self, tensor: str, keep: bool) -> None:
        """Add `tensor` to the float ones or remove it (for the commands)."""
        s = self.session
        if s is None:
            return
        kept = [t for t in s.profile.keep_float if t != tensor]
        s.profile.keep_float = kept + ([tensor] if keep else [])
        self.edited.emit(tensor)
