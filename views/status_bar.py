"""The main window's status bar: load progress and cancel, problems, model size and zoom."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QProgressBar, QToolButton

from compiler.stats import compute_stats
from views import style


def _human(n: int) -> str:
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)


def build(window) -> None:
    """Add the permanent widgets (kept as the window's attributes)."""
    bar = window.statusBar()
    window.progress = QProgressBar()
    window.progress.setRange(0, 1000)
    window.progress.setMaximumWidth(220)
    window.progress.setTextVisible(False)
    window.cancel_button = QToolButton()
    window.cancel_button.setText("Cancel")
    window.cancel_button.setToolTip("Stop loading")
    window.cancel_button.clicked.connect(window.cancel_loading)
    window.problems_label = QLabel()
    window.problems_label.setStyleSheet(f"color: {style.PROBLEM}; font-weight: bold;")
    window.stats_label = QLabel("No model")
    window.zoom_label = QLabel()
    for widget in (window.progress, window.cancel_button, window.problems_label,
                   window.stats_label, window.zoom_label):
        bar.addPermanentWidget(widget)
    window.progress.hide()
    window.cancel_button.hide()


def show_stats(window) -> None:
    """Nodes, parameters and MACs of the document's graph, and its count of invalid nodes."""
    graph = window.document.graph
    if graph is None:
        window.stats_label.setText("No model")
        window.problems_label.clear()
        return
    stats = compute_stats(graph)
    window.stats_label.setText(f"{stats.nodes:,} nodes · {_human(stats.params)} parameters "
                               f"({_human(stats.param_bytes)}B) · {_human(stats.macs)} MACs")
    window.stats_label.setToolTip(f"{stats.nodes:,} nodes, {stats.params:,} parameters "
                                  f"({stats.param_bytes:,} bytes), {stats.macs:,} MACs")
    count = len(window.document.problems)
    window.problems_label.setText(f"{count} invalid" if count else "")
