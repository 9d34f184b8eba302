"""Write compiler/quant/digits.npz: the 8x8 digits and the sample CNN's train/test split.

The digits are the UCI ML hand-written digits (E. Alpaydin and C. Kaynak, CC BY 4.0) as
scikit-learn ships them; the split is scikit-learn's stratified split with the seed and test
size the sample CNN was trained with. Storing both (30 KB) keeps scikit-learn and SciPy out of
Kiln's runtime dependencies; tests/quant/test_digits_data.py checks the file against
scikit-learn. Run with the development environment: `.venv/bin/python tools/write_digits_data.py`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from compiler.quant.calibration_data import DIGITS_SPLIT_SEED, DIGITS_TEST_SIZE

OUT = Path(__file__).resolve().parents[1] / "compiler" / "quant" / "digits.npz"


def digits_arrays() -> dict[str, np.ndarray]:
    """The images (0..16), labels and split indices, in the order scikit-learn gives them."""
    digits = load_digits()
    labels = digits.target
    train, test = train_test_split(np.arange(len(labels)), test_size=DIGITS_TEST_SIZE,
                                   random_state=DIGITS_SPLIT_SEED, stratify=labels)
    return {"images": digits.images.astype(np.uint8), "labels": labels.astype(np.uint8),
            "train": train.astype(np.int16), "test": test.astype(np.int16)}


if __name__ == "__main__":
    np.savez_compressed(OUT, **digits_arrays())
    print(f"wrote {OUT} ({OUT.stat().st_size:,} bytes)")
