"""Exactness as a property over data no one chose (`tests/exactness/`).

Float models, built here and shared, are quantized on drawn calibration sets (narrow, wide,
shifted, a single sample, constant tensors) under every schema and both rules, and run on
drawn inputs (inside the ranges, 10x and 1000x beyond them, zeros, the float extremes, half
steps of the input quantizer): the code compiled for every x86 level this CPU runs, and in
some trials for Cortex-M7 and M55 under QEMU, must give the interpreter's outputs element for
element, and the QDQ file of the onnx rule onnxruntime's integer path's. Chains of int8
TFLite builtins built here must give TFLite Micro's outputs in the interpreter and in the
compiled code, on int8 inputs of the same kinds. `make test` runs the short campaign;
KILN_EXACT_LONG=1 the long one, KILN_EXACT_SEED=N another seed, and
`python -m tests.exactness` prints the whole table.
"""

from __future__ import annotations

import pytest

from tests.conftest import require_module, require_tools, shared_models
from tests.exactness import campaign, tflite_ops
from tests.exactness.models import SHARED, available


def _ids(pieces):
    return [f"{p[0].model}-{p[0].index}" for p in pieces]


@pytest.mark.slow
@pytest.mark.parametrize("trials", campaign.chunks(), ids=_ids(campaign.chunks()))
def test_compiled_code_equals_the_interpreter_on_drawn_data(trials, oracle, tmp_path):
    require_tools("arm-none-eabi-gcc", "qemu-system-arm")
    if trials[0].model in SHARED and not available(trials[0].model):
        shared_models()  # skips without the folder, fails under CI
    outcomes = [campaign.run_trial(t, tmp_path, oracle) for t in trials]
    text = campaign.summary(outcomes)
    print(text)
    assert sum(sum(o.cases.values()) for o in outcomes) > 0
    assert not any(o.failures for o in outcomes), text


@pytest.mark.parametrize("start", range(0, tflite_ops.count(), tflite_ops.CHUNK))
def test_tflite_builtins_equal_tflite_micro_on_drawn_inputs(start, oracle, tmp_path):
    require_module("tflite_micro", "the tflite-micro wheel exists for Linux x86-64 only")
    outcome = tflite_ops.run_range(range(start, start + tflite_ops.CHUNK), oracle)
    print(outcome.summary())
    assert outcome.cases > 0
    assert not outcome.failures, outcome.summary()


def test_requantization_edges_equal_tflite_micro(oracle, tmp_path):
    require_module("tflite_micro", "the tflite-micro wheel exists for Linux x86-64 only")
    require_tools("arm-none-eabi-gcc", "qemu-system-arm")
    outcome = tflite_ops.run_edges(oracle, tmp_path)
    print(outcome.summary())
    inputs = len(tflite_ops.KINDS) * tflite_ops.PER_KIND
    assert outcome.oracle_cases == 2 * 2 * inputs
    assert outcome.cases == 2 * (2 + len(campaign.runnable_levels()) + 2) * inputs
    assert not outcome.failures, outcome.summary()


def test_the_short_campaign_covers_every_runnable_level():
    levels = campaign.runnable_levels()
    covered = {level for t in campaign.plan(long=False)
               for level in campaign.host_levels(t.index, long=False)}
    assert covered == set(levels)
    assert campaign.host_levels(0, long=True) == levels


def test_the_plan_covers_every_kind():
    trials = campaign.plan()
    assert {t.calibration for t in trials} == set(campaign.draws.CALIBRATIONS)
    assert {t.schema for t in trials} == set(campaign.draws.SCHEMAS)
    assert {t.rule for t in trials} == set(campaign.draws.RULES)
    assert any(t.arm for t in trials)
    assert campaign.plan() == trials  # the same seed draws the same plan
    assert campaign.plan(seed=1) != trials


def test_a_failing_case_writes_a_reproducer(tmp_path, monkeypatch):
    """A wrong byte from one level is a failure naming the case, with a folder to rerun it."""
    trial = campaign.Trial("wide_classifier", 0, "narrow", "tflite", "tflite", False, 7)
    real = campaign.HostNet.run

    def off_by_one(self, feeds):
        outputs = real(self, feeds)
        return {name: value + 1 for name, value in outputs.items()}

    monkeypatch.setattr(campaign, "host_levels", lambda index, long: ["host"])
    monkeypatch.setattr(campaign.HostNet, "run", off_by_one)
    outcome = campaign.run_trial(trial, tmp_path)
    assert outcome.cases["host"] == len(campaign.draws.INPUTS) * campaign.PER_KIND[0]
    assert len(outcome.failures) == outcome.cases["host"]
    assert "seed 7" in outcome.failures[0] and "host" in outcome.failures[0]
    folder = outcome.reproducers[0]
    assert {p.name for p in folder.iterdir()} >= {"model.onnx", "profile.json", "input.npy",
                                                  "README.sh"}
    assert "--engine compiled" in (folder / "README.sh").read_text()


# The models and schemas of the table, each calibrated as it was: 12 uniform samples
# in [0, 1) from seed 0, profiled by `kiln profile` and run by `kiln run` on seeds 3 and 4.
TABLE_MODELS = ("kws_ref_model_float32", "pretrainedResnet", "mnist-8", "digits_cnn")
TABLE_SCHEMAS = ("tflite", "symmetric", "uint8")
TABLE_SEEDS = (3, 4)


@pytest.mark.slow
@pytest.mark.parametrize("model", TABLE_MODELS)
def test_uniformly_calibrated_models_agree_on_host_and_cortex_m(model, tmp_path, capsys):
    """`kiln run`'s two engines, and the same quantization on Cortex-M7 and M55 under QEMU."""
    import numpy as np

    from app.cli import main
    from app.cli.run import _read_inputs
    from compiler.driver import Options, compilation
    from compiler.frontends.load import load_model
    from compiler.quant.glow_yaml import read_profile
    from compiler.quant.quantize import Options as QuantOptions
    from compiler.quant.quantize import quantize
    from tests.codegen.firmware import outputs_of_each
    from tests.conftest import SAMPLE_MODEL

    require_tools("arm-none-eabi-gcc", "qemu-system-arm")
    path = SAMPLE_MODEL if model == "digits_cnn" else shared_models() / "onnx" / f"{model}.onnx"
    graph = load_model(path)
    calib = tmp_path / "calib"
    calib.mkdir()
    rng = np.random.default_rng(0)
    for k in range(12):
        np.save(calib / f"{k:03d}.npy", rng.random(graph.inputs[0].type.shape, np.float32))
    profile = tmp_path / "p.json"
    assert main(["profile", str(path), "--data", str(calib), "-o", str(profile)]) == 0
    differing = {}
    for schema in TABLE_SCHEMAS:
        answers = {}
        for seed in TABLE_SEEDS:
            for engine in ("reference", "compiled"):
                out = tmp_path / f"{schema}-{seed}-{engine}.npz"
                assert main(["run", str(path), "--profile", str(profile), "--schema", schema,
                             "--engine", engine, "--seed", str(seed), "-o", str(out)]) == 0
                with np.load(out) as saved:
                    answers[seed, engine] = dict(saved)
            differing[schema, seed, "host"] = sum(
                int(np.count_nonzero(answers[seed, "compiled"][n] != want))
                for n, want in answers[seed, "reference"].items())
        qdq = quantize(graph, read_profile(profile), QuantOptions(schema=schema))
        compiled = compilation(qdq)
        feeds = [_read_inputs(qdq, [], seed) for seed in TABLE_SEEDS]
        for target in ("cortex-m7", "cortex-m55"):
            on_board = outputs_of_each(compiled.net(Options(target)), feeds, target,
                                       tmp_path / f"{schema}-{target}")
            for got, seed in zip(on_board, TABLE_SEEDS):
                differing[schema, seed, target] = sum(
                    int(np.count_nonzero(got[n] != want))
                    for n, want in answers[seed, "reference"].items())
    capsys.readouterr()
    print(f"{model}: outputs differing from the reference engine: {differing}")
    assert not any(differing.values()), differing


def test_kiln_run_answers_with_the_integer_graph_and_says_so(tmp_path, capsys):
    """The issue's case on the sample: the float QDQ evaluation parts from TFLite Micro's
    double rounding; the reference engine runs the integer graph, as the compiled code."""
    import numpy as np

    from app.cli import main
    from tests.conftest import SAMPLE_MODEL

    calib = tmp_path / "calib"
    calib.mkdir()
    rng = np.random.default_rng(0)
    for k in range(12):
        np.save(calib / f"{k:03d}.npy", rng.random((1, 1, 8, 8), np.float32))
    profile = tmp_path / "p.json"
    assert main(["profile", str(SAMPLE_MODEL), "--data", str(calib), "-o", str(profile)]) == 0
    capsys.readouterr()
    outputs = {}
    for name, extra in (("default", []), ("final", ["--stage", "final"]),
                        ("loaded", ["--stage", "loaded"]), ("compiled", ["--engine", "compiled"])):
        out = tmp_path / f"{name}.npz"
        assert main(["run", str(SAMPLE_MODEL), "--profile", str(profile), "--seed", "4",
                     *extra, "-o", str(out)]) == 0
        printed = capsys.readouterr().out
        assert ("the integer graph (after to_integer, TFLite Micro's rule)" in printed) == (
            name == "default")
        with np.load(out) as saved:
            outputs[name] = dict(saved)
    for name in ("final", "compiled"):
        assert all(np.array_equal(outputs[name][k], v) for k, v in outputs["default"].items())
    assert not all(np.array_equal(outputs["loaded"][k], v)
                   for k, v in outputs["default"].items())
