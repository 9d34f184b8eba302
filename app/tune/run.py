"""`kiln tune` run as a child process for the Tune Kernels dialog, its progress line by line.

The search (QEMU builds, Optuna) never lives in the GUI process: the dialog's controller
starts the command-line tool with `--progress-json` and reads one JSON object per round of
trials. Cancel sends SIGTERM, which the tool answers by saving the log and exiting with 130;
running it again on the same log resumes without measuring any schedule twice. The process
handling is Explore's (`app.explore.run.ExploreRun`): only the arguments differ.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.explore.run import STOPPED, ExploreRun

__all__ = ["STOPPED", "Settings", "TuneRun"]


@dataclass(frozen=True)
class Settings:
    """What the dialog asks `kiln tune` for."""

    model: Path
    target: str
    trials: int
    log: Path

    def arguments(self, _fresh: bool = False) -> list[str]:
        """The tool's arguments: trials in this process (no Ray), the log read and resumed."""
        return ["-m", "app.cli", "tune", str(self.model), "--target", self.target,
                "--trials", str(self.trials), "--workers", "0", "--log", str(self.log),
                "--progress-json"]


class TuneRun(ExploreRun):
    """One `kiln tune` process at a time.

    Signals:
        progress(dict): a round's line: done, total, measured, default, best and text.
        finished(str, str): "complete", "stopped" or "failed", and the failure's sentence.
    """

    def start(self, settings: Settings, fresh: bool = False) -> None:
        """Run the tool with `settings` (nothing if one already runs); a log resumes."""
        super().start(settings, fresh)
