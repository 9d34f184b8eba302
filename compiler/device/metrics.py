"""How far one set of outputs is from another: the figures ST Edge AI's validation prints.

rmse, mae, l2r (the error's L2 norm over the reference's) and cos (cosine similarity) over
every element of every sample, and top-1 accuracy against labels where there are labels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Closeness:
    """One row of the evaluation table: `got` against `want` over all samples."""

    rmse: float
    mae: float
    l2r: float
    cos: float
    elements: int
    equal: int  # elements exactly equal

    def to_json(self) -> dict:
        """The row as JSON numbers."""
        return {"rmse": self.rmse, "mae": self.mae, "l2r": self.l2r, "cos": self.cos,
                "elements": self.elements, "equal": self.equal}


def closeness(got: list[np.ndarray], want: list[np.ndarray]) -> Closeness:
    """The figures of `got` against `want` (pairs of arrays of the same shape), in float64."""
    a = np.concatenate([np.asarray(g, np.float64).reshape(-1) for g in got]) if got else \
        np.zeros(0)
    b = np.concatenate([np.asarray(w, np.float64).reshape(-1) for w in want]) if want else \
        np.zeros(0)
    diff = a - b
    norm_a, norm_b = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    both = np.isnan(a) & np.isnan(b)
    equal = int(np.count_nonzero((a == b) | both))
    if a.size == 0:
        return Closeness(0.0, 0.0, 0.0, 1.0, 0, 0)
    with np.errstate(invalid="ignore", over="ignore"):
        rmse = float(np.sqrt(np.mean(diff * diff)))
        mae = float(np.mean(np.abs(diff)))
        l2r = float(np.linalg.norm(diff) / norm_b) if norm_b else float(np.linalg.norm(diff))
        if norm_a and norm_b:
            cos = float(np.dot(a, b) / (norm_a * norm_b))
        else:
            cos = 1.0 if norm_a == norm_b else 0.0
    return Closeness(rmse, mae, l2r, cos, int(a.size), equal)


def top1(outputs: list[np.ndarray], labels: np.ndarray) -> float:
    """The share of samples whose first output's arg-max is the label."""
    hits = [int(np.argmax(np.asarray(o).reshape(-1))) == int(label)
            for o, label in zip(outputs, labels)]
    return float(np.mean(hits)) if hits else float("nan")
