"""Labelled digits written in each form calibration data takes, for the quant and GUI tests."""

from __future__ import annotations

import numpy as np

from compiler.quant.calibration_data import digits

WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
DIGIT_NAMES = [str(i) for i in range(10)]  # sorted by name, as they mean


def held_out_digits(count: int = 40):
    """The first `count` held-out digits and their labels."""
    images, labels = digits("test")
    return images[:count], labels[:count]


def write_class_folders(root, count: int = 40, names=DIGIT_NAMES):
    """Digits in folders named `names[digit]`; the class of a folder is its rank by name.

    Returns the labels `load_calibration` must give, in its order (folder by folder).
    """
    images, labels = held_out_digits(count)
    order = sorted(names)
    expected = []
    for name in order:
        folder = root / name
        folder.mkdir(parents=True)
        mine = images[labels == names.index(name)]
        for i, image in enumerate(mine):
            np.save(folder / f"{i:03d}.npy", image)
        expected += [order.index(name)] * len(mine)
    return np.array(expected)


def write_npz(path, count: int = 40):
    """An .npz of the digits (x) and their labels (y); returns the labels."""
    images, labels = held_out_digits(count)
    np.savez(path, x=images, y=labels)
    return labels


def write_labels_npy(folder, count: int = 40):
    """A folder of .npy digits (a stack first) with labels.npy beside; returns the labels."""
    images, labels = held_out_digits(count)
    folder.mkdir()
    np.save(folder / "first.npy", images[:15])  # a stack, then one sample per file
    for i in range(15, count):
        np.save(folder / f"s{i:03d}.npy", images[i])
    np.save(folder / "labels.npy", labels)
    return labels
