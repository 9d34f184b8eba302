"""Faults on the board's link end in one sentence, within 10 s, with no process left behind.

Each fault goes through `kiln validate` itself: in-process for ports a thread plays (a silent
port, an echo, chatter, noise, an MLPerf Tiny firmware that is not Kiln's, a Python runner
with one fault planted), as a subprocess where signals and QEMU's death matter. After every
test the process table is read: nothing started under this test's tag may still run.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

from app.cli import main
from compiler.codegen.build import CompiledNet
from compiler.device import emulated_board as board_module
from compiler.device import model_source, runner_firmware
from compiler.device.emulated_board import emulated_board
from compiler.device.link import Link, LinkError, open_port
from compiler.device.validate import runner_net
from compiler.driver import Compilation, compilation
from compiler.frontends.load import load_model
from compiler.interpreter import run
from tests.conftest import require_tools
from tests.helpers import make_model

TARGET = "cortex-m7"
LIMIT = 10.0  # seconds any fault may take to end
TAG = "KILN_LINK_FAULT_TEST"
KILN = Path(sys.executable).with_name("kiln")
WIDTH = 300  # float inputs: 1,200 bytes, many `db` chunks whatever the buffer


# ---- the process table ---------------------------------------------------------------------

def _tagged(tag: str) -> list[str]:
    """Live processes (zombies too) started under `tag` or a sub-tag `tag.x`, and unreaped
    children of this one."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        ours = any(item == f"{TAG}={tag}".encode() or item.startswith(f"{TAG}={tag}.".encode())
                   for item in environ.split(b"\0"))
        if ours or int(fields[1]) == os.getpid():
            found.append(f"{entry.name} ({fields[0]}) {cmdline[:120]}")
    return found


def _leftovers(tag: str, grace: float = 2.0) -> list[str]:
    """What still runs under `tag` once `grace` seconds passed (signals take a moment)."""
    deadline = time.monotonic() + grace
    while True:
        left = _tagged(tag)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


@pytest.fixture(autouse=True)
def tag(monkeypatch) -> str:
    """Every process the test starts inherits the tag; none may outlive the test."""
    value = uuid.uuid4().hex
    monkeypatch.setenv(TAG, value)
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    yield value
    left = _leftovers(value)
    for row in left:  # a failing run must not leave them running either
        with contextlib.suppress(OSError):
            os.kill(int(row.split()[0]), signal.SIGKILL)
    assert left == []


# ---- models, compiled as kiln validate compiles them ---------------------------------------

@dataclass(frozen=True)
class Model:
    """A small ONNX model on disk and the runner build kiln validate makes of it."""

    path: Path
    compiled: Compilation
    net: CompiledNet

    @property
    def hash(self) -> str:
        """The network hash a firmware of this model answers kiln-id with."""
        return model_source.network_hash(self.net)


def _model(folder: Path, name: str, factor: float) -> Model:
    nodes = [helper.make_node("Mul", ["x", "k"], ["m"]), helper.make_node("Relu", ["m"], ["y"])]
    path = folder / f"{name}.onnx"
    onnx.save(make_model(nodes, [("x", "float32", [1, WIDTH])], [("y", "float32", [1, WIDTH])],
                         {"k": np.float32(factor)}), path)
    compiled = compilation(load_model(path))
    return Model(path, compiled, runner_net(compiled, TARGET))


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> tuple[Model, Model]:
    """Two models alike in every way but a weight: their networks' hashes differ."""
    folder = tmp_path_factory.mktemp("models")
    return _model(folder, "double", 2.0), _model(folder, "triple", 3.0)


@pytest.fixture(scope="module")
def other_firmware(models, tmp_path_factory) -> runner_firmware.Firmware:
    """The real runner firmware of the second model, for QEMU."""
    require_tools("arm-none-eabi-gcc", "qemu-system-arm")
    other = models[1]
    row = runner_firmware.linked_board(TARGET, None)
    return runner_firmware.build(other.net, row, tmp_path_factory.mktemp("fw"), str(other.path))


# ---- the far end, played by a thread -------------------------------------------------------

Talk = Callable[[socket.socket, threading.Event], None]


class FakePort:
    """A loopback TCP server whose thread plays the board: `talk(connection, stop)`."""

    def __init__(self, talk: Talk):
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.05)
        self.url = f"socket://127.0.0.1:{self._server.getsockname()[1]}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(talk,), daemon=True)
        self._thread.start()

    def _serve(self, talk: Talk) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn, contextlib.suppress(OSError):
                conn.settimeout(0.05)
                talk(conn, self._stop)

    def __enter__(self) -> FakePort:
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)
        self._server.close()
        assert not self._thread.is_alive()


def _commands(conn: socket.socket, stop: threading.Event,
              answer: Callable[[str], tuple[bytes, bool]]) -> None:
    """Read `%`-ended commands; send each answer; stop when an answer says to close."""
    pending = b""
    while not stop.is_set():
        try:
            chunk = conn.recv(4096)
        except TimeoutError:
            continue
        if not chunk:
            return
        pending += chunk
        while b"%" in pending:
            raw, pending = pending.split(b"%", 1)
            reply, close = answer(raw.decode("latin-1"))
            conn.sendall(reply)
            if close:
                return


def _reply(*lines: str) -> bytes:
    return "".join(f"{line}\r\n" for line in (*lines, "m-ready")).encode("latin-1")


class FakeRunner:
    """Kiln's runner firmware in Python for one model, with one command's reply planted.

    `plant` maps a command's first word to the raw bytes sent instead of its reply and
    whether the connection closes after them. `buffer` is the command buffer it reports in
    kiln-id and enforces, as kiln_runner.c does.
    """

    def __init__(self, model: Model, buffer: int = 256,
                 plant: dict[str, tuple[bytes, bool]] | None = None):
        self.model, self.buffer, self.plant = model, buffer, plant or {}
        self.commands: list[str] = []
        self.data, self.expected, self.outputs = bytearray(), 0, None

    def talk(self, conn: socket.socket, stop: threading.Event) -> None:
        """The board's side: the boot banner, then an answer per command."""
        conn.sendall(b"m-init-done\r\nm-ready\r\n")
        _commands(conn, stop, self.answer)

    def answer(self, text: str) -> tuple[bytes, bool]:
        """What the board sends back for `text` (a command without its `%`)."""
        self.commands.append(text)
        if len(text) > self.buffer - 1:
            return _reply(f"e-[Command too long: the buffer holds {self.buffer - 1} "
                          "characters]"), False
        words = text.split()
        if words and words[0] in self.plant:
            return self.plant[words[0]]
        return _reply(*self.lines(words)), False

    def lines(self, words: list[str]) -> list[str]:
        net = self.model.net
        if not words:
            return []
        if words[0] == "kiln-id":
            return [f"m-kiln-id-[{self.model.hash}]", "m-kiln-version-[0.1.0]",
                    f"m-kiln-net-[{net.name},{TARGET},mps2-an500]",
                    f"m-kiln-buffer-[{self.buffer},{model_source.input_bytes(net)}]",
                    *(f"m-kiln-input-{i}-[{model_source.describe(net, t)}]"
                      for i, t in enumerate(net.data_inputs)),
                    *(f"m-kiln-output-{i}-[{model_source.describe(net, t)}]"
                      for i, t in enumerate(net.outputs)),
                    f"m-kiln-ticks-[SysTick ticks,25000000,{model_source.layer_slots(net)}]"]
        if words[:2] == ["db", "load"]:
            self.expected, self.data = int(words[2]), bytearray()
            return [f"m-[Expecting {self.expected} bytes]"]
        if words[0] == "db":
            self.data += bytes.fromhex(words[1])
            return ["m-load-done"] if len(self.data) == self.expected else []
        if words[0] == "infer":
            feed, at = {}, 0
            for tensor in net.data_inputs:
                size = int(np.prod(tensor.shape)) * np.dtype(tensor.dtype).itemsize
                feed[tensor.name] = np.frombuffer(bytes(self.data[at:at + size]),
                                                  tensor.dtype).reshape(tensor.shape)
                at += size
            self.outputs = list(run(self.model.compiled.final, feed).values())
            values = ",".join(f"{v:0.3f}" for out in self.outputs for v in out.ravel())
            return ["m-warmup-start-0", "m-warmup-done", "m-infer-start-1", "m-lap-us-100",
                    "m-lap-us-350", "m-infer-done", f"m-results-[{values}]"]
        if words[0] == "kiln-out":
            out = []
            for i, (tensor, value) in enumerate(zip(net.outputs, self.outputs)):
                raw = np.ascontiguousarray(value, tensor.dtype).tobytes()
                out += [f"m-kiln-out-{i}-{raw[k:k + 32].hex()}" for k in range(0, len(raw), 32)]
            return out
        if words[0] == "kiln-layers":
            return [f"m-kiln-layer-{k}-{10 + k}"
                    for k in range(model_source.layer_slots(net))]
        return [f"e-[Unknown command: {' '.join(words)}]"]


def _silent(conn: socket.socket, stop: threading.Event) -> None:
    stop.wait(30)


def _echo(conn: socket.socket, stop: threading.Event) -> None:
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            chunk = conn.recv(4096)
            if not chunk:
                return
            conn.sendall(chunk)


def _chatter(conn: socket.socket, stop: threading.Event) -> None:
    """A board logging forever: the banner is never over."""
    count = 0
    while not stop.wait(0.02):
        conn.sendall(f"INFO heartbeat {count} ok\r\n".encode())
        count += 1


def _noise(conn: socket.socket, stop: threading.Event) -> None:
    """Bytes without a line end, megabytes a second (a wrong baud on a fast stream)."""
    block = bytes(np.random.default_rng(0).integers(0, 256, 65536, dtype=np.uint8)
                  ).replace(b"\n", b"\x7f")
    while not stop.wait(0.01):
        with contextlib.suppress(TimeoutError):
            conn.sendall(block)


def _mlperf(conn: socket.socket, stop: threading.Event) -> None:
    """MLPerf Tiny's reference firmware: its own commands only."""
    def answer(text: str) -> tuple[bytes, bool]:
        word = text.split()[0] if text.split() else ""
        if word == "name":
            return _reply("m-name-dut-[unspecified]"), False
        if word == "profile":
            return _reply("m-profile-[ULPMark for tinyML Firmware V0.0.1]", "m-model-[ic01]"), False
        return _reply(f"e-[Unknown command: {word}]"), False

    conn.sendall(b"m-timestamp-mode-performance\r\nm-init-done\r\nm-ready\r\n")
    _commands(conn, stop, answer)


# ---- running kiln validate -----------------------------------------------------------------

def _validate(capsys, model: Path, port: str, *extra: str) -> tuple[int, str, float]:
    """`kiln validate` in this process: exit code, stderr and seconds taken."""
    started = time.monotonic()
    code = main(["validate", str(model), "--target", TARGET, "--port", port, "-n", "1",
                 *extra])
    return code, capsys.readouterr().err, time.monotonic() - started


def _one_sentence(err: str, port: str) -> str:
    """The only line on stderr: `kiln: error: ...` naming the port."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("kiln: error: ") and port in lines[0], lines[0]
    return lines[0]


def _fails(capsys, model: Model, port: str, *, timeout: str = "1") -> str:
    code, err, took = _validate(capsys, model.path, port, "--timeout", timeout)
    assert code != 0 and took < LIMIT, (code, took, err)
    return _one_sentence(err, port)


# ---- ports where no runner firmware talks --------------------------------------------------

@pytest.mark.parametrize("talk, said", [
    (_silent, r"nothing answered \(no 'm-ready' to '%' within 1 s\)"),
    (_echo, "the port echoes what is sent"),
    (_chatter, r"no runner firmware answers .*it printed '.*INFO heartbeat \d+ ok"),
    (_noise, r"over \d\d KiB arrived for '%' without the reply ending: not a runner firmware"),
    (_mlperf, "an MLPerf Tiny firmware answers, but not Kiln's runner"),
], ids=["silent", "echo", "chatter", "noise", "mlperf"])
def test_a_port_without_kilns_runner_is_named_with_what_it_did(capsys, models, talk, said):
    with FakePort(talk) as port:
        line = _fails(capsys, models[0], port.url)
    assert re.search(said, line), line


def test_a_silent_pty_is_reported_not_waited_on(capsys, models):
    master, slave = os.openpty()
    try:
        name = os.ttyname(slave)
        assert "nothing answered" in _fails(capsys, models[0], name)
    finally:
        os.close(slave)
        os.close(master)


def test_a_port_held_by_another_program_is_in_use(capsys, models):
    import serial

    master, slave = os.openpty()
    name = os.ttyname(slave)
    holder = serial.Serial(name, exclusive=True)
    try:
        line = _fails(capsys, models[0], name)
    finally:
        holder.close()
        os.close(slave)
        os.close(master)
    assert line.endswith(f"{name}: cannot open the port: it is in use by another program"), line


def test_a_socket_nothing_listens_on_and_a_missing_device(capsys, models):
    port = board_module.free_port()
    line = _fails(capsys, models[0], f"socket://127.0.0.1:{port}")
    assert "nothing listens there (connection refused)" in line, line
    assert _fails(capsys, models[0], "/dev/ttyKILN404").endswith("no such device")


def test_on_a_terminal_the_sentence_starts_on_a_line_of_its_own(models, monkeypatch):
    """Progress redraws one line with carriage returns; the error must not follow its text."""
    master, slave = os.openpty()
    terminal = os.fdopen(slave, "w")
    try:
        monkeypatch.setattr(sys, "stderr", terminal)
        with FakePort(_silent) as port:
            code = main(["validate", str(models[0].path), "--target", TARGET, "--port",
                         port.url, "--timeout", "1"])
        terminal.flush()
        shown = b""
        while select.select([master], [], [], 0.2)[0]:
            shown += os.read(master, 4096)
    finally:
        monkeypatch.undo()
        terminal.close()
        os.close(master)
    text = shown.decode()
    assert code != 0
    assert "Compiling" in text  # progress was drawn on the terminal
    screen = [line.rsplit("\r", 1)[-1] for line in text.replace("\r\n", "\n").split("\n")]
    errors = [line for line in screen if "kiln: error:" in line]
    assert len(errors) == 1 and errors[0].startswith(f"kiln: error: double.onnx: {port.url}: "
                                                     "nothing answered"), text


# ---- a runner that breaks mid-run ----------------------------------------------------------

CUT = "m-kiln-out-0-" + "00" * 32


@pytest.mark.parametrize("plant, said", [
    ({"kiln-out": (_reply(CUT), False)},
     "output y came as 32 bytes, not 1200; the reply was cut short"),
    ({"kiln-out": (f"{CUT}\r\nm-kiln-out-0-0000".encode(), False)},
     r"the reply to 'kiln-out' stopped before 'm-ready' \(nothing more for 1 s\); last seen: "
     r"'m-kiln-out-0-0{64} \| m-kiln-out-0-0000'"),
    ({"kiln-out": (f"{CUT}\r\n".encode(), True)},
     r"the connection closed \(the board or QEMU went away\) while waiting for 'kiln-out'"),
    ({"infer": (_reply("m-infer-done", "m-results-[0.500,#?,1.000]"), False)},
     r"garbled results line 'm-results-\[0.500,#\?,1.000\]'"),
    ({"infer": (_reply("m-infer-done", "m-re\x9a\x00lts-[1.0]"), False)},
     r"the reply lacks a line like 'm-results-.*last seen: .*m-re\\x9alts"),
    ({"infer": (b"m-warmup-start-0\r\nm-init-done\r\nm-ready\r\n", False)},
     r"the board restarted \(it printed m-init-done\) while answering 'infer'"),
    ({"kiln-id": (_reply("m-kiln-id-[0123]"), False)},
     r"the reply lacks a line like 'm-kiln-version"),
], ids=["out-short", "out-stalls-mid-line", "closed-mid-reply", "garbled-results",
        "noise-in-results", "reset-mid-infer", "identity-cut"])
def test_a_reply_cut_short_garbled_or_reset_mid_run(capsys, models, plant, said):
    runner = FakeRunner(models[0], plant=plant)
    with FakePort(runner.talk) as port:
        line = _fails(capsys, models[0], port.url)
    assert re.search(said, line), line
    assert runner.commands[0] == ""  # it resynchronized first, as MLPerf Tiny's runner does


@pytest.mark.parametrize("buffer", [80, 256])
def test_inputs_go_in_db_chunks_that_fit_the_buffer_the_firmware_reports(capsys, models,
                                                                         buffer):
    runner = FakeRunner(models[0], buffer=buffer)
    with FakePort(runner.talk) as port:
        code, err, _ = _validate(capsys, models[0].path, port.url)
    assert code == 0, err
    chunks = [c for c in runner.commands if c.startswith("db ") and not c.startswith("db load")]
    assert sum(len(c) - 3 for c in chunks) == 2 * 4 * WIDTH
    assert max(map(len, runner.commands)) <= buffer - 1  # what the firmware's buffer holds
    assert max(map(len, chunks)) >= buffer - 6  # and the buffer is used, not MLPerf's 31 bytes
    assert len(chunks) == -(-4 * WIDTH // ((buffer - 5) // 2))


# ---- the real firmware under QEMU ----------------------------------------------------------

def test_a_firmware_of_another_model_names_both_hashes(capsys, models, other_firmware):
    machine = other_firmware.board.qemu_machine
    with emulated_board(other_firmware.elf, machine) as board:
        line = _fails(capsys, models[0], board.url)
    assert f"the firmware serves network {models[1].hash}" in line, line
    assert f"this model compiled for {TARGET} is {models[0].hash}" in line, line
    assert models[0].hash != models[1].hash


def test_a_command_longer_than_the_firmwares_buffer_is_refused_whole(other_firmware):
    """kiln_runner.c's KILN_CMD_SIZE (256) holds 255 characters: one more is dropped whole."""
    with emulated_board(other_firmware.elf, other_firmware.board.qemu_machine) as board:
        port = open_port(board.url)
        try:
            link = Link(port, board.url, 5.0)
            link.synchronize()
            assert link.command(f"db load {4 * WIDTH}") == ["m-[Expecting 1200 bytes]",
                                                           "m-ready"]
            with pytest.raises(LinkError, match="Unknown command: x{20}"):
                link.command("x" * 255)
            for long in ("x" * 256, "db " + "ab" * 600, "name " + "y" * 4000):
                with pytest.raises(LinkError, match=r"refused '(x+|db|name)': Command too long: "
                                                    r"the buffer holds 255 characters"):
                    link.command(long)
            assert link.command("db print") == ["m-ready"]  # no byte of the long db was taken
            assert link.command("name") == ["m-name-dut-[kiln]", "m-ready"]
            assert f"m-kiln-id-[{model_source.network_hash(other_firmware.net)}]" in \
                link.command("kiln-id")
        finally:
            port.close()


def test_a_port_qemu_cannot_bind_is_retried_then_named(capsys, models, monkeypatch):
    require_tools("arm-none-eabi-gcc", "qemu-system-arm")
    with socket.create_server(("127.0.0.1", 0)) as taken:
        held = taken.getsockname()[1]
        real = board_module.free_port
        offered = iter([held])
        monkeypatch.setattr(board_module, "free_port", lambda: next(offered, None) or real())
        code, err, took = _validate(capsys, models[0].path, "qemu")
        assert code == 0 and took < LIMIT, err  # the next free port served
        monkeypatch.setattr(board_module, "free_port", lambda: held)
        code, err, took = _validate(capsys, models[0].path, "qemu")
    assert code != 0 and took < LIMIT
    line = _one_sentence(err, f"127.0.0.1:{held}")
    assert "QEMU stopped before its serial port" in line and "Address already in use" in line


# ---- signals: QEMU killed, Ctrl+C, kiln killed ---------------------------------------------

def _qemu_serving(tag: str, kiln: subprocess.Popen) -> int:
    """QEMU's pid once kiln has connected to its UART (kiln still running)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert kiln.poll() is None, kiln.communicate()
        for row in _tagged(tag):
            pid, _, cmd = row.split(" ", 2)
            port = re.search(r"qemu-system-arm .*tcp:127\.0\.0\.1:(\d+),", cmd)
            if port and _connected(int(port[1])):
                return int(pid)
        time.sleep(0.05)
    raise AssertionError("QEMU never served kiln validate")


def _connected(port: int) -> bool:
    table = Path("/proc/net/tcp").read_text().splitlines()[1:]
    return any(cols[1] == f"0100007F:{port:04X}" and cols[3] == "01"
               for cols in map(str.split, table))


def _kiln_validate(model: Model, tag: str) -> subprocess.Popen:
    return subprocess.Popen([str(KILN), "validate", str(model.path), "--target", TARGET,
                             "--port", "qemu", "-n", "20"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, TAG: tag})


VICTIMS = {"qemu": signal.SIGKILL, "kiln-sigint": signal.SIGINT, "kiln-sigkill": signal.SIGKILL}


def test_runs_stopped_by_a_signal_end_and_leave_nothing(models, tag):
    """QEMU killed, Ctrl+C, kiln killed outright: three runs side by side, one fault each."""
    require_tools("arm-none-eabi-gcc", "qemu-system-arm")
    kilns = {victim: _kiln_validate(models[0], f"{tag}.{victim}") for victim in VICTIMS}
    ended: dict[str, tuple[float, str, str]] = {}
    try:
        serving = {victim: (_qemu_serving(f"{tag}.{victim}", kiln), time.monotonic())
                   for victim, kiln in kilns.items()}
        for victim, (qemu, since) in serving.items():
            kiln = kilns[victim]
            time.sleep(max(0.0, since + 1.0 - time.monotonic()))  # past the first input
            assert kiln.poll() is None, (victim, kiln.communicate())
            os.kill(qemu if victim == "qemu" else kiln.pid, VICTIMS[victim])
            started = time.monotonic()
            out, err = kiln.communicate(timeout=LIMIT)
            ended[victim] = (time.monotonic() - started, out, err)
    finally:
        for kiln in kilns.values():
            if kiln.poll() is None:
                kiln.kill()
                kiln.communicate()
    for victim, (took, out, _) in ended.items():
        assert took < LIMIT and out == "", (victim, took, out)
    assert kilns["qemu"].returncode not in (0, 130)
    line = _one_sentence(ended["qemu"][2], "qemu (mps2-an500) at socket://127.0.0.1:")
    assert re.search(r"the connection closed \(the board or QEMU went away\) while waiting "
                     r"for '(db|infer|kiln-out|kiln-layers)'.*\(QEMU had stopped: killed "
                     r"by SIGKILL\)$", line), line
    assert (kilns["kiln-sigint"].returncode, ended["kiln-sigint"][2]) == (130,
                                                                          "kiln: interrupted\n")
    assert kilns["kiln-sigkill"].returncode == -signal.SIGKILL  # no word: QEMU must go alone
    assert _leftovers(tag) == []
