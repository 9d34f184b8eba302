"""`kiln compile` writes a bundle, reports it, and refuses bad targets and names in one line."""

from __future__ import annotations

import json

import numpy as np
import onnx

from app.cli import main
from tests.conftest import SAMPLE_MODEL
from tests.helpers import make_model


def test_compile_writes_bundle(tmp_path, capsys):
    assert main(["compile", str(SAMPLE_MODEL), "--target", "cortex-m7", "-o", str(tmp_path),
                 "--name", "digits"]) == 0
    # The bundle, and the firmware folder that builds it for QEMU's Cortex-M7 board.
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "Makefile", "README.md", "board.ld", "digits.build.json", "digits.h",
        "digits.input.bin", "digits.o", "digits.report.json", "main.c", "sections.ld",
        "startup.c"]
    assert "cortex-m7" in capsys.readouterr().out
    assert (tmp_path / "digits.o").read_bytes()[:4] == b"\x7fELF"


def test_compile_json_is_one_document(tmp_path, capsys):
    assert main(["compile", str(SAMPLE_MODEL), "-o", str(tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["name"] == "net" and doc["target"] == "host"
    assert doc["outputs"][0]["name"] == "logits"


def test_compile_refuses_unknown_target_and_bad_name(tmp_path, capsys):
    assert main(["compile", str(SAMPLE_MODEL), "--target", "z80", "-o", str(tmp_path)]) == 2
    assert "unknown target 'z80'" in capsys.readouterr().err
    assert main(["compile", str(SAMPLE_MODEL), "-o", str(tmp_path), "--name", "1net"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "C identifier" in err
    assert not any(tmp_path.iterdir())


def test_board_picks_its_target_and_prints_the_budget(tmp_path, capsys):
    assert main(["compile", str(SAMPLE_MODEL), "--board", "nrf52840-dk", "-o",
                 str(tmp_path)]) == 0
    out = capsys.readouterr()
    assert "cortex-m4" in out.out and "nrf52840-dk" in out.out and "262,144 B" in out.out
    assert out.err == ""
    doc = json.loads((tmp_path / "net.report.json").read_text())
    assert doc["target"] == "cortex-m4" and doc["board"]["fits"] is True
    assert doc["board"]["ram_used"] == (doc["regions"]["mutable"]
                                        + doc["regions"]["activations"])


def test_board_json_and_a_board_name_as_target(tmp_path, capsys):
    assert main(["compile", str(SAMPLE_MODEL), "--target", "stm32f746g-disco", "-o",
                 str(tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["target"] == "cortex-m7" and doc["board"]["name"] == "stm32f746g-disco"
    assert main(["compile", str(SAMPLE_MODEL), "--target", "cortex-m7", "--board",
                 "stm32f746g-disco", "-o", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["board"]["flash"] == 1024 * 1024


def test_board_errors_are_one_line(tmp_path, capsys):
    assert main(["compile", str(SAMPLE_MODEL), "--board", "arduino", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'arduino' is not a known board" in err
    assert "nrf52840-dk" in err
    assert main(["compile", str(SAMPLE_MODEL), "--target", "cortex-m7", "--board",
                 "nrf52840-dk", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not match --board nrf52840-dk" in err
    assert "cortex-m4" in err
    assert main(["compile", str(SAMPLE_MODEL), "--weights", "flash", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--weights" in err and "'flash'" in err
    assert not any(tmp_path.iterdir())


def test_over_budget_is_a_warning_not_a_failure(tmp_path, capsys):
    w = np.random.default_rng(0).standard_normal((1024, 512)).astype(np.float32)
    model = make_model([onnx.helper.make_node("MatMul", ["x", "w"], ["y"])],
                       [("x", "float32", [1, 1024])], [("y", "float32", [1, 512])], {"w": w})
    onnx.save(model, tmp_path / "big.onnx")
    assert main(["compile", str(tmp_path / "big.onnx"), "--board", "nrf52840-dk", "-o",
                 str(tmp_path / "out")]) == 0
    out = capsys.readouterr()
    assert (tmp_path / "out" / "net.o").exists()
    (line,) = out.err.splitlines()
    assert line.startswith("kiln: warning: flash over the nrf52840-dk budget by ")
    doc = json.loads((tmp_path / "out" / "net.report.json").read_text())
    over = doc["board"]["flash_used"] - doc["board"]["flash"]
    assert over > 1024 * 1024 and f"by {over:,} B" in line


def test_weights_and_io_flags_reach_the_bundle(tmp_path, capsys):
    assert main(["compile", str(SAMPLE_MODEL), "-o", str(tmp_path), "--weights", "external",
                 "--io-in-arena", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["weights"] == "external" and doc["io_in_arena"] is True
    assert doc["regions"]["constant"] == len((tmp_path / "net.weights.bin").read_bytes()) > 0
    assert {t["region"] for t in doc["inputs"] + doc["outputs"]} == {"activations"}
    assert (tmp_path / "main.c").exists() and (tmp_path / "Makefile").exists()


def test_ram_over_budget_suggests_io_in_arena(tmp_path, capsys):
    """A big input over a small part's RAM: the warning names the way out, which works."""
    nodes = [onnx.helper.make_node("Relu", ["x"], ["r"]),
             onnx.helper.make_node("ReduceMax", ["r"], ["y"], keepdims=0)]
    model = make_model(nodes, [("x", "float32", [1, 80000])], [("y", "float32", None)],
                       opset=17)
    onnx.save(model, tmp_path / "wide.onnx")
    args = ["compile", str(tmp_path / "wide.onnx"), "--board", "nrf52840-dk"]
    assert main(args + ["-o", str(tmp_path / "a")]) == 0
    warning, hint = capsys.readouterr().err.splitlines()
    assert "RAM over the nrf52840-dk budget" in warning
    assert hint.startswith("kiln: hint: ") and "--io-in-arena" in hint
    assert main(args + ["--io-in-arena", "--json", "-o", str(tmp_path / "b")]) == 0
    out = capsys.readouterr()
    assert "--io-in-arena" not in out.err
    doc = json.loads(out.out)
    assert doc["io_in_arena"] is True
