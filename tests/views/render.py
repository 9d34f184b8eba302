"""Render the canvas to PNG files to look at: `python -m tests.views.render OUTDIR`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtWidgets import QApplication  # noqa: E402

from compiler.frontends.onnx import load_onnx  # noqa: E402
from tests.views.graphs import DENSENET, INCEPTION, SAMPLE  # noqa: E402
from views.canvas import GraphCanvas  # noqa: E402
from views.layout import compute_layout  # noqa: E402
from views.minimap import MiniMap  # noqa: E402


def _canvas(graph, size=(1200, 900), show_constants=False) -> GraphCanvas:
    canvas = GraphCanvas()
    canvas.resize(*size)
    canvas.show()
    canvas.set_graph(graph, compute_layout(graph, show_constants=show_constants))
    return canvas


def render(out: Path) -> list[Path]:
    """Write the views worth looking at into `out`; returns the files."""
    out.mkdir(parents=True, exist_ok=True)
    app = QApplication.instance() or QApplication(sys.argv)
    files = []

    def save(widget, name):
        app.processEvents()
        path = out / name
        widget.grab().save(str(path))
        files.append(path)

    sample = load_onnx(SAMPLE)
    c = _canvas(sample, (700, 1000))
    save(c, "sample.png")
    c.select(2)
    save(c, "sample_selected.png")
    c.set_problems({5: "Conv: input has 16 channels, weights expect 8"})
    save(c, "sample_problem.png")
    c = _canvas(sample, (1000, 1000), show_constants=True)
    save(c, "sample_constants.png")

    inception = load_onnx(INCEPTION)
    c = _canvas(inception, (1400, 1000))
    save(c, "inception_top.png")
    c.center_on(next(n.id for n in inception.nodes if n.op == "Concat"))
    c.set_zoom(0.5)
    save(c, "inception_block.png")
    c.set_zoom(0.3)
    save(c, "inception_low_detail.png")
    c.fit()
    save(c, "inception_fit.png")

    densenet = load_onnx(DENSENET)
    c = _canvas(densenet, (1400, 1000))
    save(c, "densenet_open.png")
    c.fit()
    save(c, "densenet_fit.png")
    concat = [n.id for n in densenet.nodes if n.op == "Concat"][3]
    c.set_zoom(1.0)
    c.center_on(concat)
    c.select(concat)
    save(c, "densenet_zoomed.png")
    c.set_zoom(0.25)
    save(c, "densenet_quarter.png")
    m = MiniMap(c)
    m.resize(220, 400)
    m.show()
    save(m, "densenet_minimap.png")
    return files


if __name__ == "__main__":
    for f in render(Path(sys.argv[1] if len(sys.argv) > 1 else "out/views")):
        print(f)
