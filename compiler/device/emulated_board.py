"""QEMU as the board: the runner firmware on an emulated Cortex-M, its UART on loopback TCP.

QEMU waits (`server=on,wait=on`) until the host connects, so nothing the firmware prints at
boot is lost; `-icount shift=0` makes time a function of executed instructions, so SysTick
ticks repeat from run to run. With `regions`, the instruction-counting plugin also runs and
attributes the instructions executed between the runner's counting markers to each region
(a kernel function's addresses): the per-layer counts `kiln bench --target` reports. QEMU
is always stopped and reaped on the way out, whatever happened in between.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from compiler.device.link import LinkError
from compiler.mcu import counting, firmware

START_TIMEOUT = 10.0  # seconds for QEMU to listen on its serial port


@dataclass
class EmulatedBoard:
    """A running QEMU: the URL to open, its process, and (after it stops) the plugin's counts."""

    url: str
    process: subprocess.Popen
    log: Path | None = None
    counts: counting.Counts | None = field(default=None)


def free_port() -> int:
    """A loopback TCP port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def command(elf: Path, machine: str, port: int, plugin: str | None = None) -> list[str]:
    """The QEMU command line (the firmware README's `make run` is the same without a plugin)."""
    extra = ["-plugin", plugin, "-d", "plugin"] if plugin else []
    return [firmware.QEMU, "-M", machine, "-nographic", "-monitor", "none", "-icount",
            "shift=0", "-serial", f"tcp:127.0.0.1:{port},server=on,wait=on", *extra,
            "-kernel", str(elf)]


def _wait_listening(process: subprocess.Popen, port: int, machine: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            err = process.stderr.read().decode(errors="replace").strip() if process.stderr \
                else ""
            raise LinkError(f"qemu ({machine}): QEMU stopped before its serial port opened "
                            f"(exit {process.returncode}): {err[-300:] or 'no message'}")
        with socket.socket() as probe:  # QEMU accepts one client: look, do not connect
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                return  # bound by QEMU
        time.sleep(0.02)
    raise LinkError(f"qemu ({machine}): QEMU did not open 127.0.0.1:{port} within "
                    f"{START_TIMEOUT:g} s")


def stop(process: subprocess.Popen) -> None:
    """End QEMU: SIGTERM (it writes the plugin's counts on the way out), then SIGKILL."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=3)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait(timeout=3)
    for stream in (process.stdout, process.stderr):
        if stream:
            stream.close()


@contextlib.contextmanager
def emulated_board(elf: Path, machine: str,
                   regions: list[tuple[int, int]] | None = None) -> Iterator[EmulatedBoard]:
    """Start QEMU on `elf`; yield where to connect; stop it on the way out.

    With `regions`, `board.counts` holds the plugin's counts once the block has ended.
    """
    missing = firmware.missing_tools()
    if missing:
        raise LinkError(f"qemu: emulating the board needs {' and '.join(missing)} (Debian "
                        f"packages: {firmware.PACKAGES})")
    with tempfile.TemporaryDirectory(prefix="kiln-board-") as scratch:
        plugin = log = None
        if regions is not None:
            symbols = counting.functions(elf)
            begin, end = (symbols[m][0] for m in firmware.MARKERS)
            ranges, log = Path(scratch) / "regions.txt", Path(scratch) / "plugin.log"
            ranges.write_text("".join(f"{a:x} {b:x}\n" for a, b in regions))
            plugin = (f"{counting.plugin()},begin={begin:#x},end={end:#x},"
                      f"regions={ranges}")
        port = free_port()
        argv = command(elf, machine, port, plugin)
        if log is not None:
            argv[argv.index("-kernel"):argv.index("-kernel")] = ["-D", str(log)]
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, start_new_session=True)
        board = EmulatedBoard(f"socket://127.0.0.1:{port}", process, log)
        try:
            _wait_listening(process, port, machine)
            yield board
        finally:
            stop(process)
            if log is not None and log.is_file() and log.read_text().strip():
                with contextlib.suppress(Exception):
                    board.counts = counting.parse_log(log.read_text())


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL QEMU's whole session (a test's way of pulling the board's plug)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
