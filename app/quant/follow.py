"""Quantization follows the graph: after an edit, undo or redo the session moves to it.

A graph edit replaces the document's graph; the session's profile is carried to the new one
by `compiler.quant.remap` (ranges and hand-tuned edits of the tensors that remain, stale and
unprofiled ones named), at once on the GUI thread, so whatever reads the session next (Save,
the autosave, the overlay) sees the edited graph's profile. The evaluator is rebuilt later, in
the controller's worker.

Undo and redo bring back graph objects the history keeps; the profile each had when it was
left is remembered here, so undoing a delete brings the deleted tensor's range back exactly
instead of carrying the edited profile back (which would have lost it). Re-profile measures
on the same samples with the same choices, so the memories stay true; a calibration with
another request (other samples, method or schema) makes them obsolete and they are dropped.
"""

from __future__ import annotations

import copy
import weakref
from dataclasses import replace

from PySide6.QtCore import QObject

from app.quant.session import Bases, Session, follow_session
from app.window.workers import Job
from compiler.errors import KilnError
from compiler.ir.graph import Graph
from compiler.quant.profile import Profile
from compiler.quant.profiler import calibration_graph
from compiler.quant.remap import carry_edits, remap_profile
from views.quant_panel import KEPT_FLOAT, NOT_PROFILED, STALE, Row


class GraphFollower:
    """The profile of each graph the undo history holds, and the move from one to another.

    `bases` gives a graph's calibration graph (the document keeps each one it computed).
    """

    def __init__(self, bases: Bases = calibration_graph):
        self._bases = bases
        self._profiles: weakref.WeakKeyDictionary[Graph, Profile] = weakref.WeakKeyDictionary()
        self._request = None  # how the remembered profiles were measured

    def forget(self) -> None:
        """Another model: the remembered profiles describe nothing now."""
        self._profiles.clear()
        self._request = None

    def measured(self, session: Session) -> None:
        """A calibration made `session`; measured otherwise than before, the memories go."""
        if session.request != self._request:
            self.forget()
        self._request = session.request

    def follow(self, session: Session, graph: Graph) -> Session:
        """`session` on the edited `graph`: its remembered profile, or the current one carried.

        KilnError when the edited graph cannot be prepared for calibration.
        """
        self._profiles[session.graph] = session.profile  # as it is left (undo returns to it)
        base = self._bases(graph, session.profile.equalized)
        profile = self._profiles.get(graph)
        if profile is None:
            old = session.base if session.base is not None else \
                self._bases(session.graph, session.profile.equalized)
            profile = remap_profile(session.profile, old, base).profile
        return follow_session(session, graph, profile, base)


def _short(name: str, limit: int = 24) -> str:
    """A tensor name cut in the middle (converters write long scoped names)."""
    return name if len(name) <= limit else f"{name[:limit // 2 - 1]}…{name[-(limit // 2):]}"


def _names(names: list[str], most: int = 2) -> str:
    shown = ", ".join(_short(n) for n in names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def stale_text(session: Session | None) -> str:
    """What the stale-profile banner says about `session` ("" when its ranges are current)."""
    if session is None or not session.is_stale():
        return ""
    parts = []
    stale, missing = session.profile.stale, session.unprofiled
    if stale:
        parts.append(f"{len(stale)} range{'s were' if len(stale) > 1 else ' was'} measured "
                     f"before the edit ({_names(stale)})")
    if missing:
        parts.append(f"{len(missing)} tensor{'s are' if len(missing) > 1 else ' is'} not "
                     f"profiled ({_names(missing)})")
    # Short enough for two or three lines of a narrow dock: the table greys each stale row.
    return (f"The graph changed after calibration: {' and '.join(parts)}. Re-profile measures "
            f"them on the same samples; hand-tuned ranges stay.")


def quantized_of_calibrated(session: Session) -> str:
    """"19 of 26 calibrated tensors quantized": both counts the dock and status bar show.

    A calibrated tensor that is not quantized is kept float or folds into the node that
    makes it (a Relu's input, say, shares its output's range).
    """
    calibrated = len(session.profile.tensors)
    quantized = len(session.evaluation.tensors) if session.evaluation is not None else 0
    return f"{quantized} of {calibrated} calibrated tensors quantized"


def table_rows(session: Session) -> list[Row]:
    """The Quantization table: the evaluated tensors, stale ones marked, then the unprofiled.

    Until a session that followed an edit is evaluated, its profile's ranges stand in.
    """
    s, nan = session, float("nan")
    state = {name: STALE for name in s.profile.stale}
    if s.evaluation is not None:
        rows = [Row(name, s.producers.get(name, ""), t.low, t.high, t.scale, t.zero_point,
                    t.clipped, t.sqnr, t.rmse_over_scale, state.get(name, ""))
                for name, t in s.evaluation.tensors.items()]
        # Tensors kept in float are not evaluated as int8, but their rows stay, marked, so
        # the Keep float box can be unticked on them (an infinite SQNR sorts them as lossless).
        rows += [Row(name, s.producers.get(name, ""), *s.profile.range_of(name), nan, None,
                     nan, float("inf"), nan, KEPT_FLOAT) for name in s.profile.keep_float
                 if name in s.profile.tensors and name not in s.evaluation.tensors]
    else:
        rows = [Row(name, s.producers.get(name, ""), *s.profile.range_of(name), nan, None, nan,
                    nan, nan, state.get(name, "")) for name in s.profile.tensors]
    return rows + [Row(name, s.producers.get(name, ""), nan, nan, nan, None, nan, nan, nan,
                       NOT_PROFILED) for name in s.unprofiled]


class Following(QObject):
    """Moves the controller's session along with the document's graph; Re-profile.

    The controller (`app.quant.controller.QuantController`) calls nothing here: this listens to
    the document's graph and to the banner's button, and hands the controller sessions.
    """

    def __init__(self, controller):
        super().__init__(controller)
        self.controller = controller
        self.follower = GraphFollower(controller.state.calibration_graph)
        doc = controller.document
        doc.graphChanged.connect(self.graph_changed)
        doc.modelOpened.connect(self.follower.forget)
        controller.calibrationEnded.connect(
            lambda ok: ok and self.follower.measured(controller.session))
        controller.panel.reprofile_button.clicked.connect(self.reprofile)

    def graph_changed(self) -> None:
        """An edit, undo or redo: carry the session to the new graph, then colour it."""
        c = self.controller
        session, graph = c.session, c.document.graph
        if session is not None and graph is not None and session.graph is not graph:
            if c.document.problems:  # nothing sound to profile: wait for a fix or an undo
                c.panel.status.setText("The edited graph has invalid nodes: the quantization "
                                       "follows once they are fixed or the edit is undone.")
            else:
                try:
                    c.use_session(self.follower.follow(session, graph))
                except KilnError as exc:
                    c.panel.status.setText(f"The quantization cannot follow the edit: {exc}")
        c.show_overlay()

    def reprofile(self) -> Job | None:
        """Calibrate again on the last samples; the hand-tuned ranges and float tensors stay."""
        c = self.controller
        session = c.session
        if session is None or session.request is None:
            return None
        profile = session.profile  # the user's choices as they are now, the records shared
        graph, edits = session.graph, replace(profile, overrides=copy.deepcopy(profile.overrides),
                                              keep_float=list(profile.keep_float))
        job = c.calibrate(session.request)
        if job is not None:
            job.succeeded.connect(lambda measured: self._carry(measured, graph, edits))
        return job

    def _carry(self, measured: Session, graph: Graph, edits: Profile) -> None:
        c = self.controller
        if measured is c.session and measured.graph is graph and \
                carry_edits(edits, measured.profile):
            c.use_session(measured)  # evaluated again, with the user's ranges
