"""The host's end of the serial link: MLPerf Tiny's framing, Kiln's commands, clear failures.

A command is its text and `%`; the firmware answers with lines (CR LF; NULs and carriage
returns dropped, as MLPerf Tiny's runner drops them) ending with one holding `m-ready`. A
line beginning `e-[` is the firmware's error. Every wait has a deadline: a silent port, a
reply cut short or a board that stopped answering ends in a `LinkError` naming the port and
what was seen, never a hang.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from compiler.errors import KilnError

DEFAULT_BAUD = 115200
COMMAND_TIMEOUT = 5.0  # MLPerf Tiny's runner waits 5 s for a reply
READY = "m-ready"
MLPERF_CHUNK = 31  # bytes per `db` command in MLPerf Tiny's runner (80-character buffer)


class LinkError(KilnError):
    """The board did not answer as a runner firmware does: one sentence for the user."""


def seen(lines: list[str], raw: bytes = b"") -> str:
    """What arrived, shortened for a message."""
    if not lines and not raw:
        return "nothing arrived"
    text = " | ".join(lines[-4:]) if lines else raw[-120:].decode("latin-1")
    return f"last seen: {text[-200:]!r}"


def open_port(url: str, baud: int = DEFAULT_BAUD):
    """A pyserial port for a device name or a pyserial URL (`socket://HOST:PORT`)."""
    import serial

    try:
        port = serial.serial_for_url(url, baudrate=baud, timeout=0.05, exclusive=True,
                                     do_not_open=True)
        port.open()
        return port
    except (serial.SerialException, ValueError, OSError) as exc:
        reason = str(exc).split(": ", 1)[-1] if "could not open port" in str(exc) else exc
        busy = "in use" if "lock" in str(exc).lower() or "busy" in str(exc).lower() else ""
        raise LinkError(f"{url}: cannot open the port ({busy or reason})") from None


@dataclass
class Link:
    """A command channel to a runner firmware over an open pyserial port."""

    port: object
    where: str
    timeout: float = COMMAND_TIMEOUT

    def __post_init__(self):
        self._pending = b""

    def _read_lines(self, deadline: float, until: str) -> list[str]:
        lines: list[str] = []
        while True:
            while b"\n" in self._pending:
                raw, self._pending = self._pending.split(b"\n", 1)
                text = raw.replace(b"\r", b"").replace(b"\0", b"").decode("latin-1")
                if text:
                    lines.append(text)
                    if until in text:
                        return lines
            if time.monotonic() > deadline:
                raise LinkError(f"{self.where}: no {until!r} within the time allowed; "
                                f"{seen(lines, self._pending)}")
            try:
                chunk = self.port.read(4096)
            except Exception as exc:  # pyserial's and the socket's errors alike
                raise LinkError(f"{self.where}: the link broke ({exc}); "
                                f"{seen(lines, self._pending)}") from None
            if chunk:
                self._pending += chunk
            elif not getattr(self.port, "is_open", True):
                raise LinkError(f"{self.where}: the port closed; {seen(lines)}")

    def write(self, data: bytes) -> None:
        """Send raw bytes (a command with its `%`)."""
        try:
            self.port.write(data)
            self.port.flush()
        except Exception as exc:
            raise LinkError(f"{self.where}: writing failed ({exc})") from None

    def command(self, text: str, timeout: float | None = None) -> list[str]:
        """Send `text%`; the reply's lines up to and including `m-ready`.

        A reply holding an `e-[...]` line is a LinkError quoting it.
        """
        self.write(text.encode("ascii") + b"%")
        lines = self._read_lines(time.monotonic() + (timeout or self.timeout), READY)
        errors = [line for line in lines if line.startswith("e-[")]
        if errors:
            raise LinkError(f"{self.where}: the firmware refused {text.split()[0]!r}: "
                            f"{errors[0][3:].rstrip(']')}")
        return lines

    def synchronize(self) -> list[str]:
        """Drain the boot banner and resynchronize: a bare `%` answered by `m-ready`.

        As MLPerf Tiny's runner resets the port. A port on which nothing answers, or where
        something other than a runner firmware talks, ends here.
        """
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline:  # whatever the board printed at boot
            chunk = self.port.read(4096)
            if chunk:
                self._pending += chunk
                deadline = time.monotonic() + 0.2
        banner = self._pending
        self._pending = b""
        try:
            return self.command("")
        except LinkError as exc:
            got = banner.decode("latin-1").strip()
            hint = (f"; it printed {got[-120:]!r} instead" if got else
                    "; is the firmware flashed and the baud right?")
            raise LinkError(f"{self.where}: no runner firmware answers (no '{READY}' to "
                            f"'%' within {self.timeout:g} s){hint}") from exc


def field(lines: list[str], pattern: str, where: str) -> re.Match:
    """The first line matching `pattern` (fullmatch), or a LinkError showing the lines."""
    for line in lines:
        match = re.fullmatch(pattern, line)
        if match:
            return match
    raise LinkError(f"{where}: the reply lacks a line like {pattern!r}; {seen(lines)}")


def load_input(link: Link, data: bytes, chunk: int) -> None:
    """`db load N`, then `db HEX` commands of `chunk` bytes, ending with `m-load-done`."""
    link.command(f"db load {len(data)}")
    for start in range(0, len(data), chunk):
        lines = link.command(f"db {data[start:start + chunk].hex()}")
    if data and not any("m-load-done" in line for line in lines):
        raise LinkError(f"{link.where}: all {len(data)} bytes sent but the firmware did not "
                        f"say m-load-done; {seen(lines)}")


def results(lines: list[str], where: str) -> list[float]:
    """The floats of an `m-results-[...]` line, as MLPerf Tiny's runner parses them."""
    match = field(lines, r"m-results-\[([^]]*)\]", where)
    try:
        return [float(x) for x in match[1].split(",") if x.strip()]
    except ValueError:
        raise LinkError(f"{where}: garbled results line {match[0][:120]!r}") from None


def laps(lines: list[str], where: str) -> tuple[int, int]:
    """The first two `m-lap-us-N` timestamps (start and end of the timed runs)."""
    stamps = [int(m[1]) for m in (re.fullmatch(r"m-lap-us-([0-9]+)", x) for x in lines) if m]
    if len(stamps) < 2:
        raise LinkError(f"{where}: expected two m-lap-us- lines; {seen(lines)}")
    return stamps[0], stamps[1]
