"""A profile carried across graph edits (`compiler.quant.remap`), without Qt.

Kept ranges must be the ones a new measurement of the edited graph finds, ranges whose inputs
changed are marked stale, new tensors are named unprofiled, hand-tuned ranges and float choices
follow their tensor through a rename, and the result carries the edited graph's hash, so the
quantizer and a reloaded edited model both accept it.
"""

from __future__ import annotations

import json

import pytest

from compiler import edit
from compiler.errors import KilnError
from compiler.frontends.load import load_model
from compiler.frontends.onnx import load_onnx, to_onnx
from compiler.quant.calibration_data import load_calibration
from compiler.quant.profile import graph_hash, parse_profile
from compiler.quant.profiler import calibration_graph, profile_model
from compiler.quant.quantize import quantize
from compiler.quant.remap import carry_edits, remap_profile, tensor_signatures, unprofiled
from tests.conftest import SAMPLE_MODEL


@pytest.fixture(scope="module")
def _measured_once():
    graph = load_model(SAMPLE_MODEL)
    profile = profile_model(graph, load_calibration("digits:test", graph), "digits_cnn.onnx")
    return graph, profile.to_json()


@pytest.fixture
def measured(_measured_once):
    """The sample CNN and its profile on the digits' held-out split (a copy each test edits)."""
    graph, doc = _measured_once
    return graph, parse_profile(doc)


def _ids(graph):
    return {n.name: n.id for n in graph.nodes}


def _remap(profile, before, after):
    return remap_profile(profile, calibration_graph(before), calibration_graph(after))


def test_deleting_relu3_drops_its_range_and_marks_what_it_fed_stale(measured):
    graph, profile = measured
    profile.overrides = {"relu1_out": {"min": 0.0, "max": 2.25}}
    edited = edit.delete_node(graph, _ids(graph)["relu3"])
    remap = _remap(profile, graph, edited)
    result = remap.profile
    assert remap.modified and remap.removed == ["relu3_out"]
    assert "relu3_out" not in result.tensors
    assert result.stale == ["flatten_out", "logits"]  # Flatten now reads conv3_out
    assert remap.unprofiled == [] and unprofiled(result, calibration_graph(edited)) == []
    assert result.overrides == {"relu1_out": {"min": 0.0, "max": 2.25}}
    assert result.graph_hash == graph_hash(calibration_graph(edited)) != profile.graph_hash
    result.check_graph(calibration_graph(edited))
    quantize(edited, result)  # the quantizer takes it (before: "measured on another graph")
    fresh = profile_model(edited, load_calibration("digits:test", edited))
    for name in ("image", "relu1_out", "pool1_out", "conv3_out"):  # upstream: still right
        assert (result.tensors[name].min, result.tensors[name].max) == \
               (fresh.tensors[name].min, fresh.tensors[name].max), name
    assert result.tensors["flatten_out"].min != fresh.tensors["flatten_out"].min  # truly stale
    assert "relu3_out" in profile.tensors and profile.stale == []  # the argument is untouched


def test_renaming_a_node_changes_nothing_and_says_so(measured):
    graph, profile = measured
    edited = edit.rename_node(graph, _ids(graph)["fc"], "classifier")
    remap = _remap(profile, graph, edited)
    assert not remap.modified
    assert remap.profile.to_json() == profile.to_json() and remap.profile is not profile
    assert remap.stale == remap.unprofiled == remap.removed == []


def test_a_renamed_tensor_takes_its_range_overrides_and_keep_float_along(measured):
    graph, profile = measured
    profile.overrides = {"relu3_out": {"min": 0.0, "max": 3.5}}
    profile.keep_float = ["relu3_out"]
    edited = edit.rename_value(graph, "relu3_out", "features")
    remap = _remap(profile, graph, edited)
    result = remap.profile
    assert remap.modified and remap.carried["features"] == "relu3_out"
    assert "relu3_out" not in result.tensors and remap.removed == []
    assert result.tensors["features"] == profile.tensors["relu3_out"]
    assert result.overrides == {"features": {"min": 0.0, "max": 3.5}}
    assert result.keep_float == ["features"] and result.stale == []  # same values: not stale
    quantize(edited, result)


def test_an_inserted_operator_is_not_profiled_and_its_producer_keeps_its_range(measured):
    graph, profile = measured
    edited = edit.insert_operator(graph, "logits", "Relu")  # the new node takes over `logits`
    remap = _remap(profile, graph, edited)
    assert remap.unprofiled == ["logits"]
    assert remap.carried["logits_pre"] == "logits" and "logits_pre" not in remap.stale
    assert remap.profile.tensors["logits_pre"] == profile.tensors["logits"]
    assert unprofiled(remap.profile, calibration_graph(edited)) == ["logits"]
    quantize(edited, remap.profile)  # an unprofiled tensor stays float


def test_a_changed_attribute_keeps_the_ranges_below_it_but_marks_them_stale(measured):
    graph, profile = measured
    edited = edit.set_attribute(graph, _ids(graph)["pool1"], "strides", (1, 1))
    remap = _remap(profile, graph, edited)
    assert remap.stale == ["pool1_out", "conv3_out", "relu3_out", "flatten_out", "logits"]
    assert set(remap.profile.tensors) == set(profile.tensors) and remap.removed == []


def test_a_stale_range_stays_stale_until_measured_again(measured):
    graph, profile = measured
    once = edit.delete_node(graph, _ids(graph)["relu3"])
    twice = edit.rename_node(once, _ids(graph)["fc"], "classifier")
    first = _remap(profile, graph, once).profile
    second = _remap(first, once, twice)
    assert second.profile.stale == ["flatten_out", "logits"]


def test_signatures_ignore_names_but_not_weights(measured):
    graph, _ = measured
    renamed = edit.rename_value(graph, "conv1_out", "stem")
    before, after = tensor_signatures(graph), tensor_signatures(renamed)
    assert before["conv1_out"] == after["stem"] and before["logits"] == after["logits"]
    other = graph.snapshot()
    weight = other.constants["fc.weight"]
    weight.data = weight.data * 2
    assert tensor_signatures(other)["logits"] != before["logits"]
    assert tensor_signatures(other)["flatten_out"] == before["flatten_out"]


def test_the_carried_profile_fits_the_edited_model_once_saved_and_reloaded(measured):
    graph, profile = measured
    edited = edit.rename_node(edit.delete_node(graph, _ids(graph)["relu3"]), _ids(graph)["fc"],
                              "classifier")
    result = _remap(profile, graph, edited).profile
    reloaded = load_onnx(to_onnx(edited))  # node ids differ after a reload; the hash does not
    result.check_graph(calibration_graph(reloaded))
    back = parse_profile(json.loads(json.dumps(result.to_json())))
    assert back.stale == ["flatten_out", "logits"] and back.to_json() == result.to_json()


def test_a_stale_list_naming_an_unknown_tensor_is_refused(measured):
    _, profile = measured
    doc = {**profile.to_json(), "stale": ["no_such_tensor"]}
    with pytest.raises(KilnError, match="stale must be a list of the profile's tensor names"):
        parse_profile(doc)
    assert "stale" not in profile.to_json()  # a measured profile's file is as before


def test_carry_edits_keeps_hand_tuned_ranges_of_tensors_still_measured(measured):
    graph, profile = measured
    old = parse_profile(profile.to_json())
    old.overrides = {"relu1_out": {"min": 0.0, "max": 2.0}}
    old.keep_float = ["pool1_out"]
    new = parse_profile(profile.to_json())
    del new.tensors["pool1_out"]
    assert carry_edits(old, new) == ["relu1_out"]
    assert new.overrides == {"relu1_out": {"min": 0.0, "max": 2.0}} and new.keep_float == []
