"""The exploration's picture: score against instructions, flash as colour, the front joined.

Drawn with matplotlib's Agg canvas (no display), written atomically beside EXPLORE.json.
"""

from __future__ import annotations

import io
from pathlib import Path

from compiler.fileio import atomic_write_bytes


def save_plot(doc: dict, path: Path) -> None:
    """Write `doc`'s (an EXPLORE.json) scatter as PNG or SVG at `path`."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    measured = [t for t in doc["trials"] if "measurement" in t]
    fig = Figure(figsize=(7.5, 4.8), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    unit = "accuracy" if doc.get("score") == "accuracy" else "top-1 agreement"
    if measured:
        flash = [t["measurement"]["flash"] / 1024 for t in measured]
        low, high = min(flash), max(flash)
        for fits, marker, label in ((True, "o", "fits the board"), (False, "x", "over budget")):
            chosen = [(t, f) for t, f in zip(measured, flash) if t["measurement"]["fits"] == fits]
            if not chosen:
                continue
            points = ax.scatter([t["measurement"]["instructions"] for t, _ in chosen],
                                [100 * t["measurement"]["score"] for t, _ in chosen],
                                c=[f for _, f in chosen], cmap="viridis", vmin=low,
                                vmax=max(high, low + 1e-9), marker=marker, label=label,
                                s=36 if fits else 44)
        fig.colorbar(points, ax=ax, label="flash (KiB)")
        by_number = {t["number"]: t["measurement"] for t in measured}
        front = [by_number[n] for n in doc.get("front", []) if n in by_number]
        if front:  # four objectives: the front is marked, not joined
            ax.scatter([m["instructions"] for m in front], [100 * m["score"] for m in front],
                       s=110, facecolors="none", edgecolors="#d62728", linewidths=1.4,
                       label="Pareto front (accuracy, instructions, flash, RAM)")
    floor = 100 * (doc["float_score"] - doc["problem"]["max_drop"])
    ax.axhline(floor, color="#7f7f7f", linestyle="--", linewidth=1,
               label=f"float {100 * doc['float_score']:.1f} % minus the bound")
    ax.set_xlabel(f"instructions for one inference on {doc['problem']['target']} (QEMU)")
    ax.set_ylabel(f"{unit} (%)")
    ax.set_title(f"{Path(doc['problem']['model']).name}: {len(doc['trials'])} trials")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = Path(path)
    image = io.BytesIO()
    fig.savefig(image, format=path.suffix.lstrip(".") or "png")
    atomic_write_bytes(path, image.getvalue())
