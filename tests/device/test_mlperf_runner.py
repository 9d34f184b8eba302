"""MLPerf Tiny's runner, re-enacted over a pyserial URL, against the runner firmware in QEMU.

The host side does what mlcommons/tiny `benchmark/runner` does in performance mode (its
`serial_device.py`, `device_under_test.py` and `script.py`), written here anew: a port opened
with a 0.1 s timeout, a reader thread cutting lines at `\\n` and dropping `\\r` and `\\0`,
commands ending in `%` answered up to a line holding `m-ready`, 31-byte `db` chunks, `infer 20
5`, the same regular expressions. A firmware that passes here passes the real runner; the
outputs it prints must be the ones `kiln validate` checks against Kiln's interpreter.
"""

from __future__ import annotations

import queue
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from compiler.device import runner_firmware
from compiler.device.emulated_board import emulated_board
from compiler.device.validate import FLOAT_ATOL, FLOAT_RTOL, runner_net, samples, validate
from compiler.driver import compilation
from compiler.frontends.load import load_model
from compiler.interpreter import run
from tests.conftest import SAMPLE_MODEL, require_tools, shared_models

TARGET = "cortex-m7"
CHUNK = 31  # the runner's bytes per `db` command without an interface board
ITERATIONS, WARMUPS = 20, 5  # tests_performance.yaml's ic01 step
PRINTED = 0.0005  # results are printed with %0.3f: half a unit of the last decimal


class RunnerSerial:
    """The runner's SerialDevice: a reader thread queues lines; commands wait for `m-ready`."""

    def __init__(self, url: str):
        import serial

        self.port = serial.serial_for_url(url, timeout=0.1)
        self.lines: queue.Queue[str] = queue.Queue()
        self.lost = ""
        self._running = False
        self._thread = threading.Thread(target=self._read_loop, daemon=True)

    def reset_port(self) -> None:
        """Flush, send a bare `%`, read until the port is quiet (the runner's reset_port).

        QEMU holds the guest until a client connects, so the boot banner a real board printed
        before anyone listened arrives here; left in the queue it would shift every reply.
        """
        self.port.reset_input_buffer()
        self.port.write(b"%")
        deadline = time.monotonic() + 5
        while self.port.read(1) and time.monotonic() < deadline:
            pass

    def start(self) -> None:
        """Start the reader thread, as entering the runner's SerialDevice does."""
        self._running = True
        self._thread.start()

    def _read_loop(self) -> None:
        text = ""
        while self._running:
            char = self.port.read(1).decode(errors="replace")
            if char == "\n":
                self.lines.put(text)
                text = ""
            elif char and char not in "\r\0":
                text += char
        self.lost = text

    def send_command(self, command: str, timeout: float = 5.0) -> list[str]:
        """Write `command%`; the lines up to the one holding `m-ready` (5 s per line)."""
        self.port.write(f"{command}%".encode())
        lines = []
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise RuntimeError(f"No response to command {command}") from None
            if line:
                lines.append(line)
            if "m-ready" in line:
                return lines

    def close(self) -> None:
        """Stop the reader and close the port."""
        self._running = False
        self._thread.join(timeout=2)
        self.port.close()


class RunnerDut:
    """The runner's DUT: name and profile parsed (three tries each), load, infer."""

    def __init__(self, port: RunnerSerial):
        self.port = port
        self.fields: dict[str, str] = {}

    def _parse(self, command: str, pattern: str) -> bool:
        found = False
        for line in self.port.send_command(command):
            match = re.match(pattern, line)
            if match:
                self.fields[match.group(1)] = match.group(2)
                found = True
        return found

    def identify(self) -> None:
        """get_name, get_model and get_profile, as the runner's init_dut calls them."""
        for command, pattern in (("name", r"^m-(name)-dut-\[([^]]+)]$"),
                                 ("profile", r"^m-(model|profile)-\[([^]]+)]$")):
            for _ in range(3):
                if self._parse(command, pattern):
                    break

    def load(self, data: bytes) -> list[list[str]]:
        """`db load N`, then N bytes as 62-hex-digit chunks; every reply, in order."""
        replies = [self.port.send_command(f"db load {len(data)}")]
        for start in range(0, len(data), CHUNK):
            chunk = "".join(f"{byte:02x}" for byte in data[start:start + CHUNK])
            replies.append(self.port.send_command(f"db {chunk}"))
        return replies

    def infer(self, number: int, warmups: int) -> list[str]:
        """`infer N W`; warm-ups included, with the runner's 30 s allowance."""
        return self.port.send_command(f"infer {number} {warmups}", timeout=30.0)


@dataclass
class Inference:
    """What script.py's _gather_infer_results and _print_AP_results make of an infer reply."""

    results: list[float]
    start_time: int
    end_time: int
    iterations: int

    @property
    def elapsed_us(self) -> int:
        """end - start, as the runner takes it."""
        return self.end_time - self.start_time

    @property
    def throughput(self) -> float:
        """Inferences a second: N / (elapsed_us / 1e6)."""
        return self.iterations / (self.elapsed_us / 1_000_000) if self.elapsed_us > 0 else 0.0


def results_of(lines: list[str]) -> list[float] | None:
    """The floats of the reply's `m-results-[...]` line (the last, as the runner keeps it)."""
    found = None
    for line in lines:
        match = re.match(r"^m-results-\[([^]]+)\]$", line)
        if match:
            found = [float(x) for x in match.group(1).split(",") if x.strip()]
    return found


def gather(lines: list[str], iterations: int) -> Inference:
    """The results floats and the first and second `m-lap-us-` stamps of a reply."""
    found: dict[str, object] = {"results": results_of(lines)}
    for line in lines:
        match = re.match(r"^m-lap-us-([0-9]+)$", line)
        if match:
            found["end_time" if "start_time" in found else "start_time"] = int(match.group(1))
    return Inference(found["results"], found["start_time"], found["end_time"], iterations)


@dataclass(frozen=True)
class Case:
    """A model, the input the runner sends, and the identity `profile` should answer with."""

    model: Path
    inputs: str
    model_id: str


def _resnet8(scratch: Path) -> Case:
    """ResNet-8 int8 (MLPerf Tiny's ic01) on a natural image, shifted to int8 as it expects."""
    models = shared_models()
    images = np.load(models / "inputs" / "natural_rgb_uint8_Nx32x32x3.npy")
    data = scratch / "image_int8.npy"
    np.save(data, (images[:1].astype(np.int16) - 128).astype(np.int8))
    return Case(models / "tflite" / "pretrainedResnet_quant.tflite", str(data), "ic01")


def _digits(scratch: Path) -> Case:
    """The sample float model, on the first of the UCI digits."""
    return Case(SAMPLE_MODEL, "digits", "digits_cnn")


def _dequantized(compiled, feed) -> list[float]:
    """Kiln's interpreter's outputs as `results` prints them: dequantized, flattened."""
    values = []
    for value, out in zip(compiled.final.outputs, run(compiled.final, feed).values()):
        quant = value.type.quant
        out = np.asarray(out, np.float64)
        if quant is not None and value.type.dtype != "float32":
            out = (out - quant.zero_point[0]) * np.float32(quant.scale[0])
        values += out.ravel().tolist()
    return values


@pytest.mark.parametrize("make_case", [_resnet8, _digits], ids=["resnet8-int8", "digits-float"])
def test_mlperf_runner_sequence_gets_the_outputs_kiln_validate_checks(make_case, tmp_path):
    require_tools("arm-none-eabi-gcc", "arm-none-eabi-objcopy", "qemu-system-arm")
    case = make_case(tmp_path)
    compiled = compilation(load_model(case.model))
    net = runner_net(compiled, TARGET)
    row = runner_firmware.linked_board(TARGET, None)
    fw = runner_firmware.build(net, row, tmp_path / "fw", str(case.model), case.model_id)
    feed = samples(compiled, case.inputs, 1).feeds[0]
    data = b"".join(np.ascontiguousarray(feed[t.name], t.dtype).tobytes()
                    for t in net.data_inputs)
    want = _dequantized(compiled, feed)

    with emulated_board(fw.elf, row.qemu_machine) as board:
        port = RunnerSerial(board.url)
        try:
            port.reset_port()
            port.start()
            dut = RunnerDut(port)
            dut.identify()
            loaded = dut.load(data)
            inferred = dut.infer(ITERATIONS, WARMUPS)
            again = port.send_command("results")
        finally:
            port.close()
        # The same board, a second client: what `kiln validate --port socket://...` reports.
        checked = validate(case.model, TARGET, board.url, case.inputs, 1, compiled=compiled)

    assert dut.fields == {"name": "kiln", "model": case.model_id,
                          "profile": "ULPMark for tinyML Firmware V0.0.1"}
    assert loaded[0] == [f"m-[Expecting {len(data)} bytes]", "m-ready"]
    assert len(loaded) == 1 + -(-len(data) // CHUNK)
    assert all(reply == ["m-ready"] for reply in loaded[1:-1])
    assert loaded[-1] == ["m-load-done", "m-ready"]
    assert f"m-warmup-start-{WARMUPS}" in inferred and f"m-infer-start-{ITERATIONS}" in inferred

    result = gather(inferred, ITERATIONS)
    assert len(result.results) == len(want) == sum(int(np.prod(t.shape)) for t in net.outputs)
    slack = [PRINTED + 1e-6 + (FLOAT_ATOL + FLOAT_RTOL * abs(w) if net.outputs[0].dtype ==
                              "float32" else 0) for w in want]
    off = [abs(g - w) - s for g, w, s in zip(result.results, want, slack)]
    assert max(off) <= 0, f"results {result.results} vs interpreter {np.round(want, 3)}"
    assert results_of(again) == result.results  # `results` repeats them
    assert port.lost == ""  # no line cut short

    assert checked.passed, checked.problems
    elements = checked.float_elements + checked.integer_elements
    assert elements == len(want) and checked.float_close + checked.integer_equal == elements
    # The runner's timing is 20 runs between two stamps; validate's one run of the same input.
    assert result.elapsed_us > 0
    per_run = result.elapsed_us / ITERATIONS
    assert abs(per_run - checked.latency_us[0]) <= 0.02 * checked.latency_us[0] + 1
    assert result.throughput == pytest.approx(ITERATIONS * 1e6 / result.elapsed_us)
    assert result.throughput == pytest.approx(1e6 / checked.latency_us[0], rel=0.03)
