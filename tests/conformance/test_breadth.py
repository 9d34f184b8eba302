"""Kiln passes at least as many of ONNX's node cases as onnxruntime, on Kiln's element types.

Both engines run every selected case in this process (`tests.conformance.breadth`), so the
comparison holds for the onnx and onnxruntime versions installed, not for numbers written down.
Compiled for the host, Kiln's count may only grow: COMPILED_FLOOR is the count the code
generator reached, raised as kernels arrive.
"""

from __future__ import annotations

from tests.conformance import breadth

# Cases compiled for the host and matching every output: 1330 measured on an AVX-512 host
# (onnxruntime passes 1325); the floor leaves room for a few float cases another vector width
# rounds past their tolerance. Raise it as kernels arrive, never lower it.
COMPILED_FLOOR = 1320


def test_the_interpreter_passes_at_least_as_many_node_cases_as_onnxruntime(record_property):
    census = breadth.take(compiled=True)
    print(census.summary())
    record_property("onnx_breadth", census.summary())
    assert len(breadth.SELECTED) > 1000, "the onnx wheel's node cases did not load"
    assert len(census.interpreter) >= len(census.onnxruntime), (
        f"onnxruntime passes {len(census.onnxruntime)} cases, Kiln's interpreter "
        f"{len(census.interpreter)}; onnxruntime only: "
        f"{sorted(census.onnxruntime - census.interpreter)[:20]}")
    assert len(census.compiled) >= COMPILED_FLOOR, (
        f"compiled for the host, Kiln passes {len(census.compiled)} cases, fewer than the "
        f"{COMPILED_FLOOR} it passed before")


def test_the_selection_is_of_kiln_element_types_only():
    """A case with a float16 or string tensor, or a sequence, is outside the comparison."""
    names = set(breadth.SELECTED)
    assert "test_relu" in names and "test_equal" in names and "test_argmax_default_axis_example" \
        in names
    assert not names & {"test_cast_FLOAT_to_FLOAT16", "test_equal_string", "test_sequence_map_add_"
                        "2_sequences"}
