"""A quantized model in the window: the to_integer stage and an integer node's Properties."""

import onnx
from PySide6.QtCore import Qt

from tests.gui.helpers import make_window
from tests.quant.int8_oracle import quantize_digits
from tests.quant.test_to_integer import _qdq_conv_relu
from views.graph_items import EdgeItem

TIMEOUT = 60000


def test_int8_edges_are_distinct_and_an_integer_conv_shows_its_requantization(qtbot,
                                                                              tmp_path):
    model = quantize_digits(tmp_path)["QDQ"]
    window = make_window(qtbot, model)
    graph = window.document.graph
    edges = [i for i in window.canvas.scene().items() if isinstance(i, EdgeItem)]
    integer = {e.value for e in edges if e.integer}
    assert integer and all(graph.value(v).type.dtype == "int8" for v in integer)
    assert all(graph.value(e.value).type.dtype == "float32" for e in edges if not e.integer)
    stepping = window.stepping
    qtbot.waitUntil(lambda: stepping.result is not None, timeout=TIMEOUT)
    index = next(i for i, s in enumerate(stepping.stages)
                 if s.record is not None and s.record.name == "to_integer")
    assert stepping.stages[index].record.changed
    stepping.show_stage(index)
    graph = stepping.stages[index].graph
    conv = next(n for n in graph.nodes if n.op == "QLinearConv")
    canvas = stepping.canvas
    canvas.center_on(conv.id)
    centre = canvas.mapFromScene(canvas.box_rect(conv.id).center())
    qtbot.mouseClick(canvas.viewport(), Qt.MouseButton.LeftButton, pos=centre)
    properties = window.properties
    qtbot.waitUntil(lambda: properties.current_node_id() == conv.id, timeout=TIMEOUT)
    assert properties.read_only
    text = properties.quant_text.text()
    assert "real = " in text and "× (q − " in text
    channels = conv.inputs[3].type.shape[0]
    assert f"{channels} output channels" in text and "onnx rule" in text
    table = properties.requant_table
    assert table.isVisibleTo(properties) and table.rowCount() == channels
    assert all((1 << 30) <= int(table.item(r, 2).text()) < (1 << 31) for r in range(channels))
    stepping.leave_stage()


def test_the_passes_panel_says_which_unit_stays_float(qtbot, tmp_path):
    model, _ = _qdq_conv_relu(out_zero_point=-128, weights_as_input=True)
    path = tmp_path / "computed_weights.onnx"
    onnx.save(model, path)
    window = make_window(qtbot, path)
    stepping = window.stepping
    qtbot.waitUntil(lambda: stepping.result is not None, timeout=TIMEOUT)
    index = next(i for i, s in enumerate(stepping.stages)
                 if s.record is not None and s.record.name == "to_integer")
    stepping.show_stage(index)
    text = stepping.panel.doc.toPlainText()
    assert "(Conv) stays float: its weights (wf) are computed at run time" in text
    stepping.leave_stage()
