"""`kiln explore` run as a child process for the Explore panel, its progress read line by line.

The search (and Ray, when it runs trials on workers) never lives in the GUI process: the panel
starts the command-line tool with `--progress-json` and reads one JSON object per trial from
its output. Cancel sends SIGTERM, which the tool answers by saving every trial measured and
exiting with 130; running the same command on the same file resumes without measuring any
trial again.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, QProcess, QProcessEnvironment, Signal

import app
from compiler.explore.points import error_sentence, parse_progress

STOPPED = 130  # the tool's exit code when asked to stop


@dataclass(frozen=True)
class Settings:
    """What the panel asks `kiln explore` for."""

    model: Path
    calibration: str
    evaluation: str
    target: str
    board: str | None
    max_drop: float  # accuracy points
    trials: int
    workers: int | None  # None: a local Ray instance on every core; 0: in the tool's process
    output: Path

    def arguments(self, fresh: bool) -> list[str]:
        """The tool's arguments (`fresh`: start over even if the file holds trials)."""
        args = ["-m", "app.cli", "explore", str(self.model), "--data", self.calibration,
                "--eval", self.evaluation, "--target", self.target, "--max-drop",
                f"{self.max_drop:g}", "--trials", str(self.trials), "--progress-json",
                "-o", str(self.output)]
        if self.board:
            args += ["--board", self.board]
        if self.workers is not None:
            args += ["--workers", str(self.workers)]
        if fresh:
            args.append("--force")
        return args


class ExploreRun(QObject):
    """One `kiln explore` process at a time.

    Signals:
        progress(dict): a progress line (`Exploration.Progress` as JSON).
        finished(str, str): "complete", "stopped" or "failed", and the failure's sentence.
    """

    progress = Signal(dict)
    finished = Signal(str, str)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.process: QProcess | None = None
        self._buffer = b""
        self._errors = b""
        self._stopping = False  # Cancel was asked: a signal that came first still stops it

    def is_running(self) -> bool:
        """True while the tool runs."""
        return self.process is not None and \
            self.process.state() != QProcess.ProcessState.NotRunning

    def start(self, settings: Settings, fresh: bool) -> None:
        """Run the tool with `settings` (nothing if one already runs)."""
        if self.is_running():
            return
        process = QProcess(self)
        process.setProgram(sys.executable)
        arguments = settings.arguments(fresh)
        if getattr(sys, "frozen", False):  # the standalone build: its executable is `kiln`
            arguments = arguments[2:]
        process.setArguments(arguments)
        # The project's packages are importable from the folder holding them.
        process.setWorkingDirectory(str(Path(app.__file__).resolve().parents[1]))
        env = QProcessEnvironment.systemEnvironment()
        env.insert("PYTHONUNBUFFERED", "1")
        process.setProcessEnvironment(env)
        process.readyReadStandardOutput.connect(self._read)
        process.readyReadStandardError.connect(
            lambda: setattr(self, "_errors", self._errors + bytes(
                process.readAllStandardError())))
        process.finished.connect(self._finished)
        process.errorOccurred.connect(self._error)
        self._buffer, self._errors, self._stopping = b"", b"", False
        self.process = process
        process.start()

    def cancel(self) -> None:
        """Ask the tool to stop (SIGTERM): it keeps what it measured and exits."""
        if self.is_running():
            self._stopping = True
            self.process.terminate()

    def kill(self) -> None:
        """Stop the tool now (the window closes); the file keeps every finished trial."""
        if self.is_running():
            self.process.kill()
            self.process.waitForFinished(5000)

    def _read(self) -> None:
        self._buffer += bytes(self.process.readAllStandardOutput())
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            parsed = parse_progress(line.decode("utf-8", "replace"))
            if parsed is not None:
                self.progress.emit(parsed)

    def _finished(self, code: int, status) -> None:
        self._read()
        if code == 0 and status == QProcess.ExitStatus.NormalExit:
            self.finished.emit("complete", "")
        elif code == STOPPED or (self._stopping and
                                 status == QProcess.ExitStatus.CrashExit):
            self.finished.emit("stopped", "")
        else:
            self.finished.emit("failed", error_sentence(self._errors.decode("utf-8", "replace")))

    def _error(self, error) -> None:
        if error == QProcess.ProcessError.FailedToStart:
            self.finished.emit("failed", f"could not start {sys.executable} "
                                         f"({self.process.errorString()})")
