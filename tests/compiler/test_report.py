"""The report's figures and its SVG timeline, without Qt or a browser."""

from __future__ import annotations

import re

import pytest

from compiler.driver import Options, compilation
from compiler.errors import KilnError
from compiler.frontends.load import load_model
from compiler.report import collect_report, render_html
from compiler.report.timeline_svg import timeline_svg
from tests.conftest import SAMPLE_MODEL


@pytest.fixture(scope="module")
def digits():
    return compilation(load_model(SAMPLE_MODEL, {}))


def test_timeline_draws_each_buffer_where_the_plan_puts_it(digits):
    memory = digits.plan(Options()).to_json()
    svg = timeline_svg(memory)
    rects = re.findall(r'<g class="buffer"><title>([^<]*)</title><rect x="([\d.]+)" '
                       r'y="([\d.]+)" width="([\d.]+)" height="([\d.]+)"', svg)
    assert len(rects) == len(memory["buffers"])
    steps = len(memory["live_bytes"])
    for (title, _x, y, w, _h), b in zip(rects, memory["buffers"]):
        assert title.startswith(b["name"])
        assert float(w) == pytest.approx(786 * (b["last"] + 1 - b["first"]) / steps, abs=0.01)
        assert float(y) == pytest.approx(14 + 246 * b["offset"] / memory["activations"],
                                         abs=0.01)
    assert "http" not in svg


def test_layers_add_up_and_absent_parts_are_said(digits):
    report = collect_report(digits, "digits_cnn.onnx", "cortex-m4", count=False)
    assert sum(la.macs for la in report.layers) == report.summary["macs"]
    assert report.memory == digits.plan(Options("cortex-m4")).to_json()
    assert all(la.instructions is None and la.time_us(100) is None for la in report.layers)
    assert [a.split(":")[0] for a in report.absent] == ["Instructions per layer",
                                                        "Quantization", "Board budget"]
    page = render_html(report)
    assert page.count('<tr class="layer">') == len(report.layers)
    assert "<script>" in page and "<link" not in page and "url(" not in page


def test_bad_clock_and_board_mismatch_are_one_sentence(digits):
    from compiler.codegen.targets import BOARDS

    with pytest.raises(KilnError, match="positive"):
        collect_report(digits, "m", "host", clock_mhz=0)
    with pytest.raises(KilnError, match="nrf52840-dk has a cortex-m4"):
        collect_report(digits, "m", "cortex-m7", BOARDS["nrf52840-dk"])


def test_a_report_without_counts_promises_no_times(digits):
    page = render_html(collect_report(digits, "digits_cnn.onnx", "host", count=False))
    assert "estimated times at" not in page and "Estimated time at" not in page
    assert "no times: instructions are counted on Cortex-M targets only" in page
