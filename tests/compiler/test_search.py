"""Node search by name, op type, tensor name or regular expression."""

import pytest

from compiler.errors import KilnError
from compiler.frontends.onnx import load_onnx
from compiler.search import find_nodes
from tests.conftest import SAMPLE_MODEL


@pytest.fixture(scope="module")
def sample():
    return load_onnx(SAMPLE_MODEL)


def _names(graph, ids):
    by_id = {n.id: n.name for n in graph.nodes}
    return [by_id[i] for i in ids]


def test_substring_matches_names_and_op_types_ignoring_case(sample):
    assert _names(sample, find_nodes(sample, "CONV")) == ["conv1", "conv2", "conv3"]
    assert _names(sample, find_nodes(sample, "relu")) == ["relu1", "relu2", "relu3"]
    assert _names(sample, find_nodes(sample, "gemm")) == ["fc"]


def test_output_tensor_names_match(sample):
    assert _names(sample, find_nodes(sample, "logits")) == ["fc"]


def test_regex(sample):
    assert _names(sample, find_nodes(sample, r"^conv[13]$", regex=True)) == ["conv1", "conv3"]
    assert find_nodes(sample, "conv[", regex=False) == []


def test_bad_regex_is_one_line_error(sample):
    with pytest.raises(KilnError, match="bad regular expression") as info:
        find_nodes(sample, "conv[", regex=True)
    assert "\n" not in str(info.value)


def test_empty_query_and_no_match(sample):
    assert find_nodes(sample, "") == []
    assert find_nodes(sample, "transformer") == []
