"""onnx.backend.test's node cases, kept in Kiln's cache folder between runs.

The installed onnx wheel ships no node data: its loader computes every case (the 3-D pooling
ones with its own slow reference operators), about ten seconds in each test worker at every
collection. The cases only depend on the onnx version, so the computed list is pickled once
under that version and read back (a twentieth of a second) until onnx changes.
"""

from __future__ import annotations

import pickle
import sys
import warnings

import numpy as np
import onnx

from compiler.cache import cache_dir
from compiler.fileio import atomic_write_bytes


def _computed() -> list:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the case generators warn about their own overflows
        from onnx.backend.test.loader import load_model_tests

        return [case for case in load_model_tests(kind="node") if case.model is not None]


def node_cases() -> list:
    """Every node case that has a model, as the onnx version installed computes them."""
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    path = cache_dir() / f"onnx-node-cases-{onnx.__version__}-np{np.__version__}-py{python}.pkl"
    try:
        with open(path, "rb") as stored:
            return pickle.load(stored)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        pass
    cases = _computed()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, pickle.dumps(cases, protocol=pickle.HIGHEST_PROTOCOL))
    except OSError:
        pass  # a read-only cache only costs the next collection its time
    return cases
