"""The builtins tflite-micro registers, against the builtins Kiln reads.

The list comes from the installed tflite-micro package (`tests/tflite/tflm_census.py`), so a
builtin added upstream, or one Kiln starts to read, fails here until `UNREAD` says so:
the list is the open gap of operator breadth, kept exact in both directions.
"""

from __future__ import annotations

import numpy as np
import pytest

from compiler.frontends.tflite.builtins import CONVERTERS, FLOAT_ONLY, UNREAD, element_types
from tests.conftest import require_module
from tests.tflite.breadth_cases import CASES
from tests.tflite.oracles import tflm
from tests.tflite.tflm_census import registered_builtins, schema_builtins
from tests.tflite.writer import write


@pytest.fixture(scope="module")
def registered():
    require_module("tflite_micro", "the tflite-micro wheel exists for Linux x86-64 only")
    return registered_builtins()


def test_the_census_tells_registered_builtins_from_unknown_ones(registered):
    """Builtins tflite-micro's kernels list are found (those whose Prepare crashes on a bare
    model too), and TensorFlow Lite's desktop-only ones are not."""
    assert {"CONV_2D", "FULLY_CONNECTED", "SOFTMAX", "MEAN", "MIRROR_PAD", "WHILE",
            "UNIDIRECTIONAL_SEQUENCE_LSTM", "VAR_HANDLE"} <= registered
    assert not registered & {"LSTM", "RNN", "HASHTABLE_LOOKUP", "TOPK_V2", "NON_MAX_SUPPRESSION_V4",
                             "STABLEHLO_ADD", "RELU_N1_TO_1"}
    assert registered <= set(schema_builtins())


def test_every_registered_builtin_is_read_or_listed_as_open(registered, record_property):
    """Kiln reads each builtin tflite-micro registers, or it is in UNREAD; the list names
    nothing Kiln reads and nothing tflite-micro lacks."""
    read = registered & set(CONVERTERS)
    record_property("tflm_census", f"{len(read)} of {len(registered)} read")
    print(f"tflite-micro registers {len(registered)} builtins: Kiln reads {len(read)}, "
          f"{len(UNREAD)} are open")
    unlisted = registered - set(CONVERTERS) - set(UNREAD)
    assert not unlisted, f"registered by tflite-micro, neither read nor listed: {sorted(unlisted)}"
    assert not set(UNREAD) & set(CONVERTERS), \
        f"read by Kiln now, drop from UNREAD: {sorted(set(UNREAD) & set(CONVERTERS))}"
    assert set(UNREAD) <= registered, \
        f"not registered by this tflite-micro: {sorted(set(UNREAD) - registered)}"


def test_every_builtin_kiln_reads_has_generated_cases(registered):
    """Each registered builtin Kiln reads has a generated model (breadth_cases), checked against
    its oracle and compiled for the host and Cortex-M7 in test_tflite_breadth."""
    read = registered & set(CONVERTERS)
    covered = {c.builtin for c in CASES}
    assert not read - covered, f"read but without a generated case: {sorted(read - covered)}"
    int8 = {c.builtin for c in CASES if "int8" in c.dtypes}
    print(f"generated cases: {len(covered & read)} builtins, {len(int8 & read)} with int8")


def test_what_kiln_reads_in_float_only_tflite_micro_refuses_in_int8(registered):
    """FLOAT_ONLY is not a gap: the int8 model of each such builtin's case, given to TFLite
    Micro, fails to prepare or to run (a builtin TFLite Micro runs in int8 would need Kiln's
    8-bit form)."""
    runs = []
    for builtin in sorted(FLOAT_ONLY & registered):
        model, shapes = next(c for c in CASES if c.builtin == builtin).build(True)
        try:
            runtime = tflm(write(model))
            for i, index in enumerate(model.inputs):
                t = model.tensors[index]
                runtime.set_input(np.zeros(shapes[t.name], t.dtype), i)
            runtime.invoke()
        except RuntimeError:
            continue
        runs.append(builtin)
    assert not runs, f"TFLite Micro runs these in int8, Kiln reads them in float only: {runs}"


def test_the_element_types_kiln_states_are_those_its_cases_check(registered):
    """compiler/frontends/tflite/builtins.py states each builtin's element types (for the
    docs); the generated cases check exactly those."""
    for builtin in registered & set(CONVERTERS):
        checked = set().union(*(c.dtypes for c in CASES if c.builtin == builtin))
        stated = set(element_types(builtin))
        for dtype in ("float32", "int8", "bool"):
            assert (dtype in checked) == (dtype in stated), (builtin, dtype, checked, stated)
