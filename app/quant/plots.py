"""PNG figures of a quantization report: per-tensor SQNR, and each histogram with its range."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from compiler.quant.evaluate import QuantReport  # noqa: E402
from compiler.quant.profile import Profile  # noqa: E402


def save_plots(report: QuantReport, profile: Profile, folder: Path) -> list[Path]:
    """sqnr.png, and hist_<tensor>.png for every profiled tensor in the report."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    names = [t.name for t in report.tensors]
    values = [t.sqnr if np.isfinite(t.sqnr) else 0.0 for t in report.tensors]
    fig, ax = plt.subplots(figsize=(max(4, 0.5 * len(names) + 2), 3.5))
    ax.bar(range(len(names)), values, color="#3a6ea5")
    ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("SQNR (dB)")
    ax.set_title("quantized tensors against float")
    fig.tight_layout()
    written.append(folder / "sqnr.png")
    fig.savefig(written[-1], dpi=100)
    plt.close(fig)
    for t in report.tensors:
        entry = profile.tensors.get(t.name)
        if entry is None:
            continue
        counts = np.asarray(entry.histogram, np.float64)
        edges = np.linspace(entry.min, entry.max, len(counts) + 1)
        fig, ax = plt.subplots(figsize=(5, 3))
        ax.bar(edges[:-1], counts, width=np.diff(edges), align="edge", color="#8aa9c9")
        ax.axvline(t.low, color="#c0392b")
        ax.axvline(t.high, color="#c0392b")
        ax.set_yscale("symlog")
        ax.set_title(f"{t.name}: range [{t.low:.4g}, {t.high:.4g}]", fontsize=9)
        fig.tight_layout()
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in t.name)
        written.append(folder / f"hist_{safe}.png")
        fig.savefig(written[-1], dpi=100)
        plt.close(fig)
    return written
