"""One plan everywhere: the Memory panel, `kiln memory`, the Code panel and the exported bundle.

All four ask the compile driver, so for every shared model and the sample, with the default
pipeline and with one edited in the Passes panel, they must report the same arena, buffer
offsets and constant bytes.
"""

import json

import pytest

from app import cli
from compiler.passes import Pipeline, save_pipeline
from tests.conftest import SAMPLE_MODEL, shared_models
from tests.gui.helpers import make_window
from views.export_dialog import ExportOptions

FLOAT_MODELS = ("ad01_fp32", "kws_ref_model_float32", "mnist-8", "pretrainedResnet",
                "vww_96_float")
# int8 QDQ models: planned, shown and exported with their int8 kernels like the float ones.
INT8_MODELS = ("ad01_int8", "kws_ref_model", "pretrainedResnet_quant", "vww_96_int8")
TIMEOUT = 120000


def _model(name: str):
    return SAMPLE_MODEL if name == "sample" else shared_models() / "onnx" / f"{name}.onnx"


def _essentials(doc: dict) -> dict:
    """What must agree: arena, lower bound, constant bytes and every buffer's placement."""
    return {"activations": doc["activations"], "lower_bound": doc["lower_bound"],
            "constant": doc["constant"], "mutable": doc["mutable"],
            "alignment": doc["alignment"],
            "buffers": sorted((b["name"], b["offset"], b["size"], b["first"], b["last"])
                              for b in doc["buffers"])}


def _edited(pipeline: Pipeline) -> Pipeline:
    edited = Pipeline.from_json(pipeline.to_json())
    for config in edited.passes:
        config.enabled = config.name != "fuse_activations"
    return edited


def _panels_agree(qtbot, window, capsys, tmp_path, model) -> dict:
    doc = window.document
    memory, code = window.memory, window.code
    graph, key = doc.graph, doc.pipeline.to_json()

    def memory_ready():
        current = memory.current
        return (not memory.is_busy() and current is not None and current.graph is graph
                and current.pipeline == json.dumps(key, sort_keys=True))
    qtbot.waitUntil(memory_ready, timeout=TIMEOUT)
    shown = _essentials(memory.current.doc)

    conv = next((n for n in graph.nodes if n.op in ("Conv", "Gemm", "MatMul", "QLinearConv",
                                                    "QGemm")), graph.nodes[0])
    code.dock.show()
    window.canvas.select(conv.id)
    stamp = (json.dumps(key, sort_keys=True), doc.options(), conv.id)
    qtbot.waitUntil(lambda: not code.is_busy() and code.last is not None
                    and code.last.stamp == stamp, timeout=TIMEOUT)
    assert _essentials(code.last.plan.to_json()) == shown

    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "pipeline.json"
    save_pipeline(doc.pipeline, path)
    assert cli.main(["memory", str(model), "--json", "--pipeline", str(path)]) == 0
    assert _essentials(json.loads(capsys.readouterr().out)) == shown

    folder = tmp_path / "bundle"
    job = window.export.start(ExportOptions("host", None, "net", "embedded", False, folder))
    with qtbot.waitSignal(job.succeeded, timeout=TIMEOUT):
        pass
    report = json.loads((folder / "net.report.json").read_text())
    assert _essentials(report["memory"]) == shown
    assert report["regions"]["activations"] == shown["activations"]
    return shown


@pytest.mark.slow
@pytest.mark.parametrize("name", ("sample",) + FLOAT_MODELS + INT8_MODELS)
def test_every_panel_and_command_reports_one_plan(qtbot, capsys, tmp_path, name):
    model = _model(name)
    window = make_window(qtbot, model)
    default = _panels_agree(qtbot, window, capsys, tmp_path / "default", model)
    window.stepping.run(_edited(window.document.pipeline))  # as the pipeline editor's Run does
    edited = _panels_agree(qtbot, window, capsys, tmp_path / "edited", model)
    # Unfused, the Relus of these two take steps (and buffers) of their own.
    if name in ("sample", "pretrainedResnet"):
        assert edited != default
