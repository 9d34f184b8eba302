"""Drive onnx.backend.test's node cases with Kiln's reference interpreter as the backend.

The case list is computed: every node case whose operators are all in Kiln's registry (at an
opset Kiln reads) runs, except the documented exclusions in exclusions.py; outputs are compared
with onnx.backend.test's own tolerance check. `python -m tests.conformance.summary` prints the
counts (passed / claimed / excluded).
"""

from __future__ import annotations

import re
import warnings

import pytest
from onnx.backend.test.runner import Runner

from tests.conformance.exclusions import EXCLUDED
from tests.conformance.kiln_backend import KilnBackend, claims

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the case generators warn about their own overflows
    from onnx.backend.test.loader import load_model_tests

    CASES = {c.name: c for c in load_model_tests(kind="node") if c.model is not None}


def excluded_reason(name: str) -> str | None:
    """The documented reason a claimed case is excluded, or None."""
    for pattern, reason in EXCLUDED.items():
        if re.fullmatch(pattern, name):
            return reason
    return None


CLAIMED = sorted(name for name, case in CASES.items() if claims(case.model))
RUN = [name for name in CLAIMED if excluded_reason(name) is None]


def run_case(name: str) -> None:
    """Run one conformance case through Kiln; raises AssertionError on a mismatch."""
    case = CASES[name]
    rep = KilnBackend.prepare(case.model)
    for inputs, expected in case.data_sets:
        outputs = list(rep.run(inputs))
        Runner.assert_similar_outputs(expected, outputs, rtol=case.rtol, atol=case.atol)


@pytest.mark.parametrize("name", RUN)
def test_conformance(name):
    run_case(name)


def test_every_exclusion_matches_a_claimed_case():
    stale = [p for p in EXCLUDED if not any(re.fullmatch(p, n) for n in CLAIMED)]
    assert not stale, f"exclusions that match no claimed case: {stale}"
