"""What the error overlay paints: each node in its output's SQNR bin, the int8 figures on edges.

Pure functions of a calibration session, so the controller (`app.quant.controller`) only decides
when the overlay shows; the canvas (`views.canvas.GraphCanvas.set_overlay`) draws it.
"""

from __future__ import annotations

from app.quant.session import Session
from compiler.ir.graph import Graph
from views.quant_colors import sqnr_color


def node_colors(session: Session | None, graph: Graph | None,
                layout=None) -> dict[object, tuple[str, str]]:
    """Canvas key -> (fill, text) of its output's SQNR bin; {} unless evaluated on `graph`.

    With the canvas's `layout`, closed groups take their worst member's bin.
    """
    s = session
    if s is None or s.evaluation is None or s.graph is not graph:
        return {}
    tensors = s.evaluation.tensors
    colors = {s.keys[n]: sqnr_color(t.sqnr) for n, t in tensors.items()
              if s.keys.get(n) is not None}
    worst: dict[object, float] = {}
    for n, t in tensors.items():
        if s.keys.get(n) is not None:
            worst[s.keys[n]] = t.sqnr
    for key, tensor in s.folds.items():  # a Conv whose Relu's range it shares
        if tensor in tensors:
            colors[key] = sqnr_color(tensors[tensor].sqnr)
            worst[key] = tensors[tensor].sqnr
    colors.update(_group_colors(worst, layout))
    return colors


def _group_colors(sqnr: dict[object, float], layout) -> dict[object, tuple[str, str]]:
    """A closed group on the canvas takes its worst member's bin."""
    if layout is None or layout.grouping is None:
        return {}
    hierarchy = layout.grouping.hierarchy
    out = {}
    for key in layout.groups:
        if key in layout.boxes:
            values = [sqnr[n] for n in hierarchy.members(key) if n in sqnr]
            if values:
                out[key] = sqnr_color(min(values))
    return out


def edge_texts(session: Session) -> tuple[dict[str, str], dict[str, str]]:
    """(tooltip notes, labels written on the edge) per tensor name, of an evaluated session.

    The label is short enough for the gap between two layers; the note has every figure.
    Tensors kept in float say so on their edge.
    """
    s = session
    dtype = "uint8" if s.options.schema.startswith("uint8") else "int8"
    tensors = s.evaluation.tensors
    notes = {name: f"{dtype}: scale {t.scale:.6g}, zero point {t.zero_point}; SQNR "
                   f"{t.sqnr:.1f} dB" for name, t in tensors.items()}
    labels = {name: f"scale {t.scale:.4g} · zp {t.zero_point}" for name, t in tensors.items()}
    labels.update({name: "float (kept)" for name in s.profile.keep_float})
    return notes, labels
