"""The host's end of the serial link: MLPerf Tiny's framing, Kiln's commands, clear failures.

A command is its text and `%`; the firmware answers with lines (CR LF; NULs and carriage
returns dropped, as MLPerf Tiny's runner drops them) ending with one holding `m-ready`. A
line beginning `e-[` is the firmware's error. Every wait has a deadline: a silent port, a
reply cut short or a board that stopped answering ends in a `LinkError` naming the port and
what was seen, never a hang.
"""

from __future__ import annotations

import errno
import re
import select
import time
from dataclasses import dataclass

from compiler.errors import KilnError

DEFAULT_BAUD = 115200
COMMAND_TIMEOUT = 5.0  # MLPerf Tiny's runner waits 5 s for a reply
READY = "m-ready"
BOOT = "m-init-done"  # what the runner prints when it (re)starts
COMPUTING = ("m-warmup-start", "m-infer-start", "m-lap-us")  # lines a run follows
POLL = 0.05  # longest wait for bytes before looking at the deadline again
BANNER_LIMIT = 1.0  # seconds of boot banner drained at most: a port that never stops talking
MAX_LINE = 64 * 1024  # no runner line is this long; a stream of bytes without a newline ends
MAX_REPLY = 8 * 1024 * 1024  # characters of one reply: more than any MCU's outputs in hex

# What pyserial says when the other end went away (a socket closed, a USB port unplugged).
_GONE = ("socket disconnected", "returned no data", "Input/output error", "Broken pipe",
         "Connection reset", "Bad file descriptor")


class LinkError(KilnError):
    """The board did not answer as a runner firmware does: one sentence for the user."""


def seen(lines: list[str], raw: bytes = b"") -> str:
    """What arrived (the last lines and any line begun), shortened for a message."""
    parts = lines[-4:] + ([raw[-60:].decode("latin-1")] if raw else [])
    if not parts:
        return "nothing arrived"
    return f"last seen: {' | '.join(parts)[-200:]!r}"


def _open_failure(exc: Exception) -> str:
    """Why a port did not open, in a few words (pyserial repeats the port in its text)."""
    text = str(exc)
    code = getattr(exc, "errno", None)
    if "lock" in text.lower() or code in (errno.EBUSY, errno.EAGAIN):
        return "it is in use by another program"
    if "refused" in text.lower():
        return "nothing listens there (connection refused)"
    if code == errno.ENOENT or "No such file" in text:
        return "no such device"
    if code == errno.EACCES or "Permission denied" in text:
        return "permission denied (is the user in the dialout group?)"
    return re.sub(r"^(\[Errno \d+\] )?[Cc]ould not open port [^:]*: ?", "", text) or repr(exc)


def open_port(url: str, baud: int = DEFAULT_BAUD, write_timeout: float = COMMAND_TIMEOUT):
    """A pyserial port for a device name or a pyserial URL (`socket://HOST:PORT`).

    Reads never block (the Link waits with select, so a reply is taken the moment it
    arrives); a write that cannot drain within `write_timeout` fails instead of hanging.
    """
    import serial

    try:
        port = serial.serial_for_url(url, baudrate=baud, timeout=0, exclusive=True,
                                     write_timeout=write_timeout, do_not_open=True)
        port.open()
        return port
    except (serial.SerialException, ValueError, OSError) as exc:
        raise LinkError(f"{url}: cannot open the port: {_open_failure(exc)}") from None


@dataclass
class Link:
    """A command channel to a runner firmware over an open pyserial port."""

    port: object
    where: str
    timeout: float = COMMAND_TIMEOUT

    def __post_init__(self):
        self._pending = b""

    def _receive(self, deadline: float, doing: str, lines: list[str]) -> bytes:
        """Whatever bytes arrive before `deadline` (at most POLL seconds of waiting)."""
        wait = max(0.0, min(POLL, deadline - time.monotonic()))
        try:
            fileno = self.port.fileno()
        except Exception:  # a URL handler without a descriptor: poll gently
            fileno = None
        try:
            if fileno is None:
                time.sleep(min(wait, 0.002))
            else:
                select.select([fileno], [], [], wait)
            return self.port.read(4096)
        except Exception as exc:  # pyserial's and the socket's errors alike
            what = ("the connection closed (the board or QEMU went away)"
                    if any(gone in str(exc) for gone in _GONE) else f"reading failed ({exc})")
            raise LinkError(f"{self.where}: {what} while waiting for {doing}; "
                            f"{seen(lines, self._pending)}") from None

    def _read_lines(self, timeout: float, doing: str, boot_ok: bool = False) -> list[str]:
        """The lines up to one holding `m-ready`; a restarted board or a deadline ends it.

        Time beyond the link's own timeout is for computing: the board may stay silent that
        long only before its first line or after one saying a run started; a reply that
        stops anywhere else (mid-line too) ends after the link's timeout of silence.
        """
        start = last = time.monotonic()
        quiet = min(timeout, self.timeout)
        lines: list[str] = []
        size = 0
        while True:
            while b"\n" in self._pending:
                raw, self._pending = self._pending.split(b"\n", 1)
                text = raw.replace(b"\r", b"").replace(b"\0", b"").decode("latin-1")
                if not text:
                    continue
                lines.append(text)
                size += len(text)
                if BOOT in text and not boot_ok:
                    raise LinkError(f"{self.where}: the board restarted (it printed {BOOT}) "
                                    f"while answering {doing}; {seen(lines)}")
                if READY in text:
                    return lines
            if len(self._pending) > MAX_LINE or size > MAX_REPLY:
                big = max(size, len(self._pending)) // 1024
                raise LinkError(f"{self.where}: over {big} KiB "
                                f"arrived for {doing} without the reply ending: not a runner "
                                f"firmware talking; {seen(lines[-4:], self._pending[-120:])}")
            computing = not self._pending and (not lines or lines[-1].startswith(COMPUTING))
            deadline = start + timeout if computing else min(start + timeout, last + quiet)
            if time.monotonic() > deadline:
                if lines or self._pending:
                    raise LinkError(f"{self.where}: the reply to {doing} stopped before "
                                    f"'{READY}' (nothing more for {quiet:g} s); "
                                    f"{seen(lines, self._pending)}")
                raise LinkError(f"{self.where}: no reply to {doing} within {timeout:g} s")
            chunk = self._receive(deadline, doing, lines)
            if chunk:
                self._pending += chunk
                last = time.monotonic()

    def write(self, data: bytes) -> None:
        """Send raw bytes (a command with its `%`)."""
        try:
            self.port.write(data)
        except Exception as exc:
            what = ("the connection closed (the board or QEMU went away)"
                    if any(gone in str(exc) for gone in _GONE) else f"writing failed ({exc})")
            raise LinkError(f"{self.where}: {what} while sending {_name(data)}") from None

    def command(self, text: str, timeout: float | None = None) -> list[str]:
        """Send `text%`; the reply's lines up to and including `m-ready`.

        A `timeout` above the link's own is time the board may spend computing. A reply
        holding an `e-[...]` line is a LinkError quoting it; so is a reply in which the
        board boots again (it was reset, or crashed and restarted, mid-command).
        """
        self.write(text.encode("ascii") + b"%")
        lines = self._read_lines(timeout or self.timeout, _name(text.encode("ascii")))
        errors = [line for line in lines if line.startswith("e-[")]
        if errors:
            raise LinkError(f"{self.where}: the firmware refused {_name(text.encode())}: "
                            f"{errors[0][3:].rstrip(']')}")
        return lines

    def _drain(self, quiet: float) -> bytes:
        """What the port says until it stays quiet for `quiet` s (BANNER_LIMIT s at most)."""
        got = b""
        start = time.monotonic()
        until = start + quiet
        while time.monotonic() < min(until, start + BANNER_LIMIT):
            chunk = self._receive(until, "the boot banner", [])
            if chunk:
                got = (got + chunk)[-4096:]
                until = time.monotonic() + quiet
        return got

    def synchronize(self) -> list[str]:
        """Drain the boot banner and resynchronize: a bare `%` answered by `m-ready`.

        As MLPerf Tiny's runner resets the port. Any `m-ready` will do (an MLPerf Tiny
        firmware may call the empty command unknown); a board that boots meanwhile (opening
        some USB ports resets it) is asked again once it is up. A port on which nothing
        answers, or where something other than a runner firmware talks, ends here.
        """
        banner = self._drain(0.3)
        self._pending = b""
        for attempt in range(2):
            self.write(b"%")
            try:
                lines = self._read_lines(self.timeout, "'%'", boot_ok=True)
            except LinkError as exc:
                raise LinkError(self._not_a_runner(banner, exc)) from None
            if attempt or not any(BOOT in line for line in lines):
                return lines
            self._drain(0.3)  # the boot's m-ready, or the answer to the lost '%'
            self._pending = b""
        return lines

    def _not_a_runner(self, banner: bytes, exc: LinkError) -> str:
        """Why no runner firmware answered '%': silence, an echo, or other talk."""
        if "the connection closed" in str(exc) or "arrived for" in str(exc):
            return str(exc)
        reply = self._pending.strip()
        waited = f"no '{READY}' to '%' within {self.timeout:g} s"
        if not banner.strip() and not reply:
            if "socket://" in self.where:  # QEMU serves one client at a time
                return (f"{self.where}: nothing answered ({waited}): no runner firmware "
                        "there, or another program is already connected to it")
            return (f"{self.where}: nothing answered ({waited}): no runner firmware there, or "
                    "the baud is wrong")
        if not banner.strip() and reply.strip(b"%") == b"":
            return (f"{self.where}: the port echoes what is sent ({waited}): a loopback or a "
                    "terminal, not a runner firmware")
        got = (banner + self._pending).decode("latin-1").strip()
        return f"{self.where}: no runner firmware answers ({waited}); it printed {got[-120:]!r}"


def _name(command: bytes) -> str:
    """A command as a message names it: its first word, quoted."""
    words = command.rstrip(b"%").split()
    return repr(words[0][:40].decode("latin-1")) if words else "'%'"


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
