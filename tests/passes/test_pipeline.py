"""Passes as registered data, and pipelines: defaults, files, stages."""

import json
import re

import pytest

from compiler.passes import (
    CATEGORIES,
    PassConfig,
    Pipeline,
    PipelineError,
    UnknownPassError,
    all_passes,
    default_pipeline,
    get_pass,
    load_pipeline,
    save_pipeline,
)


def test_every_pass_has_a_category_and_a_short_docstring():
    passes = all_passes()
    assert len(passes) == 29
    for p in passes:
        assert p.category in CATEGORIES
        sentences = len(re.findall(r"[.;](?:\s|$)", p.doc.replace("e.g.", "eg")))
        assert 2 <= sentences <= 4, f"{p.name}: {sentences} sentences"
        assert p.location.split(":")[0].endswith(".py")


def test_the_default_pipeline_uses_every_pass_and_says_why():
    pipeline = default_pipeline()
    # The codegen stage is not a pipeline entry: the compile driver runs it after any pipeline.
    assert {c.name for c in pipeline} == {p.name for p in all_passes()
                                          if p.category != "codegen"}
    assert all(c.note for c in pipeline)
    assert pipeline.passes[-1].name == "dce"


def test_unknown_pass_names_are_one_line_errors():
    with pytest.raises(UnknownPassError, match="unknown pass 'nope' \\(known passes: cse"):
        get_pass("nope")


def test_pipelines_save_and_load(tmp_path):
    pipeline = Pipeline([PassConfig("cse", mode="fixpoint", max_iterations=3, note="why"),
                         PassConfig("dce", enabled=False)])
    save_pipeline(pipeline, tmp_path / "p.json")
    assert load_pipeline(tmp_path / "p.json") == pipeline
    assert [c.name for c in pipeline.enabled()] == ["cse"]


@pytest.mark.parametrize(("content", "reason"), [
    ("{", "not valid JSON"),
    ("[]", "not a Kiln pipeline"),
    ('{"format": "kiln-pipeline", "version": 9, "passes": []}', "version 9"),
    ('{"format": "kiln-pipeline", "version": 1, "passes": {}}', "must be a list"),
    ('{"format": "kiln-pipeline", "version": 1, "passes": [{"name": "fold"}]}',
     "entry 1: unknown pass 'fold'"),
    ('{"format": "kiln-pipeline", "version": 1, "passes": [{"name": "dce", "mode": "twice"}]}',
     "\"mode\" must be"),
    ('{"format": "kiln-pipeline", "version": 1, "passes": [{"name": "dce", "max_iterations": 0}]}',
     "positive integer"),
    ('{"format": "kiln-pipeline", "version": 1, "passes": [{"name": "dce", "speed": 1}]}',
     "unknown key"),
])
def test_bad_pipeline_files_are_refused_in_one_line(tmp_path, content, reason):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(PipelineError, match=reason) as info:
        load_pipeline(path)
    assert "\n" not in str(info.value)


def test_a_missing_pipeline_file():
    with pytest.raises(PipelineError, match="no such file"):
        load_pipeline("does-not-exist.json")


def test_stage_index_finds_first_and_kth_runs():
    pipeline = default_pipeline()
    names = [c.name for c in pipeline.enabled()]
    assert pipeline.stage_index("dce") == names.index("dce")
    assert pipeline.stage_index("dce#2") == len(names) - 1
    for bad, reason in (("dce#3", "runs 2 time"), ("nope", "not in the pipeline"),
                        ("dce#x", "run number")):
        with pytest.raises(PipelineError, match=reason):
            pipeline.stage_index(bad)


def test_pipeline_documents_are_plain_json():
    document = default_pipeline().to_json()
    assert json.loads(json.dumps(document)) == document
