"""QEMU as the board: the runner firmware on an emulated Cortex-M, its UART on loopback TCP.

QEMU waits (`server=on,wait=on`) until the host connects, so nothing the firmware prints at
boot is lost; `-icount shift=0` makes time a function of executed instructions, so SysTick
ticks repeat from run to run. With `regions`, the instruction-counting plugin also runs and
attributes the instructions executed between the runner's counting markers to each region
(a kernel function's addresses): the per-layer counts `kiln bench --target` reports. QEMU
is always stopped and reaped on the way out, whatever happened in between, and on Linux it
dies with the host process even when that is killed outright.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from compiler.device.link import LinkError
from compiler.mcu import counting, firmware

START_TIMEOUT = 10.0  # seconds for QEMU to listen on its serial port
START_ATTEMPTS = 3  # another program may take the free port before QEMU binds it
_IN_USE = "Address already in use"


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


def command(elf: Path, machine: str, port: int | str, plugin: str | None = None) -> list[str]:
    """The QEMU command line (the firmware README's `make run` is the same without a plugin)."""
    extra = ["-plugin", plugin, "-d", "plugin"] if plugin else []
    return [firmware.QEMU, "-M", machine, "-nographic", "-monitor", "none", "-icount",
            "shift=0", "-serial", f"tcp:127.0.0.1:{port},server=on,wait=on,nodelay=on",
            *extra,
            "-kernel", str(elf)]


def _listener_of(port: int) -> set[str] | None:
    """Socket inodes listening on 127.0.0.1:`port` (None where /proc cannot tell)."""
    try:
        table = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return None
    where = f"0100007F:{port:04X}"
    return {cols[9] for cols in map(str.split, table) if cols[1] == where and cols[3] == "0A"}


def _listening(process: subprocess.Popen, port: int) -> bool:
    """Whether QEMU itself listens on `port`: not merely someone (a stranger may hold it)."""
    inodes = _listener_of(port)
    if inodes is None:  # no /proc: a port nobody can bind is taken to be QEMU's
        with socket.socket() as probe:  # QEMU accepts one client: look, do not connect
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                return True
            return False
    if not inodes:
        return False
    with contextlib.suppress(OSError):
        fds = Path(f"/proc/{process.pid}/fd")
        return any(os.readlink(fd) in {f"socket:[{i}]" for i in inodes} for fd in fds.iterdir())
    return False


def _wait_listening(process: subprocess.Popen, port: int, machine: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            err = process.stderr.read().decode(errors="replace").strip() if process.stderr \
                else ""
            raise LinkError(f"qemu ({machine}): QEMU stopped before its serial port "
                            f"127.0.0.1:{port} opened (exit {process.returncode}): "
                            f"{err[-300:] or 'no message'}")
        if _listening(process, port):
            return
        time.sleep(0.02)
    raise LinkError(f"qemu ({machine}): QEMU did not open 127.0.0.1:{port} within "
                    f"{START_TIMEOUT:g} s")


def _die_with_parent():
    """In the child before exec: SIGKILL when the thread that started QEMU goes (Linux).

    A host killed outright (SIGKILL, a closed terminal) runs no clean-up; without this its
    QEMU, in a session of its own, would run on. The call is resolved before forking.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pdeathsig = 1  # PR_SET_PDEATHSIG

    def arm() -> None:
        prctl(pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    return arm


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
        arm = _die_with_parent()
        for attempt in range(START_ATTEMPTS):
            port = free_port()
            argv = command(elf, machine, port, plugin)
            if log is not None:
                argv[argv.index("-kernel"):argv.index("-kernel")] = ["-D", str(log)]
            process = None
            try:
                process = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                           start_new_session=True, preexec_fn=arm)
                _wait_listening(process, port, machine)
            except BaseException as exc:  # Ctrl+C while starting too: no QEMU left running
                if process is not None:
                    stop(process)
                if isinstance(exc, LinkError) and _IN_USE in str(exc) and \
                        attempt + 1 < START_ATTEMPTS:
                    continue
                raise
            break
        board = EmulatedBoard(f"socket://127.0.0.1:{port}", process, log)
        try:
            yield board
        except LinkError as exc:
            raise _with_qemu_state(exc, process) from None
        finally:
            stop(process)
            if log is not None and log.is_file() and log.read_text().strip():
                with contextlib.suppress(Exception):
                    board.counts = counting.parse_log(log.read_text())


def _with_qemu_state(exc: LinkError, process: subprocess.Popen) -> LinkError:
    """A link failure that QEMU's end explains: the sentence says QEMU had stopped, and how."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=0.5)  # a killed QEMU closes its socket just before it is reaped
    code = process.returncode
    if code is None:
        return exc
    how = (f"killed by {signal.Signals(-code).name}" if code < 0 and -code in
           signal.valid_signals() else f"exit {code}")
    return LinkError(f"{exc} (QEMU had stopped: {how})")
