"""The stored digits and split are scikit-learn's, so `digits:train` needs no scikit-learn."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from compiler.quant.calibration_data import (
    DIGITS_FILE,
    DIGITS_SPLIT_SEED,
    DIGITS_TEST_SIZE,
)
from tests.conftest import SAMPLE_MODEL


def test_stored_digits_are_scikit_learns():
    # Imported here, not at collection: scikit-learn takes seconds to import, and every test
    # worker collects this module while only one runs the test.
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x_train, x_test, y_train, y_test = train_test_split(
        digits.images / 16.0, digits.target, test_size=DIGITS_TEST_SIZE,
        random_state=DIGITS_SPLIT_SEED, stratify=digits.target)
    with np.load(DIGITS_FILE) as data:
        np.testing.assert_array_equal(data["images"], digits.images)
        np.testing.assert_array_equal(data["labels"], digits.target)
        for part, images, labels in (("train", x_train, y_train), ("test", x_test, y_test)):
            np.testing.assert_array_equal(data["images"][data[part]] / 16.0, images)
            np.testing.assert_array_equal(data["labels"][data[part]], labels)


def test_digits_load_without_scikit_learn():
    """With sklearn made unimportable, digits:test still loads (the runtime needs only numpy)."""
    code = ("import sys; sys.modules['sklearn'] = None\n"
            "from compiler.frontends.load import load_model\n"
            "from compiler.quant.calibration_data import load_calibration\n"
            f"data = load_calibration('digits:test', load_model({str(SAMPLE_MODEL)!r}))\n"
            "print(data.samples.shape, len(data.labels))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(450, 1, 8, 8) 450"
