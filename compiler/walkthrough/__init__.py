"""A pass-by-pass lesson as a folder of HTML pages: `kiln walkthrough` and Passes > Export."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from compiler.driver import Compilation, Options
from compiler.errors import KilnError
from compiler.walkthrough.pages import MARKER, render
from compiler.walkthrough.stages import Stage, graph_stages, lowering_stages

__all__ = ["MARKER", "Stage", "WalkthroughExists", "all_stages", "check_folder",
           "walkthrough_files", "write_walkthrough"]


class WalkthroughExists(KilnError):
    """The folder holds a walkthrough already: replacing it needs the user's word."""


def all_stages(compiled: Compilation, options: Options) -> list[Stage]:
    """The pipeline's stages, then the lowering passes of `options`' target."""
    return graph_stages(compiled) + lowering_stages(compiled, options)


def walkthrough_files(compiled: Compilation, options: Options, model: str,
                      notes: dict[str, str] | None = None) -> dict[str, bytes]:
    """Every file of the walkthrough of `compiled` for `options`' target, by name."""
    return render(model, options.resolved_target().name, all_stages(compiled, options), notes)


def check_folder(folder: str | Path, force: bool) -> None:
    """Refuse a folder the walkthrough may not replace (KilnError, one sentence).

    An empty or missing folder is fine; a previous walkthrough needs `force`; anything else is
    someone's files and is never replaced.
    """
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise KilnError(f"{folder} is a file, not a folder for the walkthrough")
    if not folder.is_dir() or not any(folder.iterdir()):
        return
    if not (folder / MARKER).is_file():
        raise KilnError(f"{folder} holds files that are not a walkthrough; choose an empty "
                        "or new folder")
    if not force:
        raise WalkthroughExists(f"{folder} already holds a walkthrough; replace it with --force")


def write_walkthrough(folder: str | Path, files: dict[str, bytes], *, force: bool = False,
                      check: Callable[[], None] | None = None) -> list[Path]:
    """Write `files` into a new folder beside `folder`, then rename it into place.

    `check` runs once the new folder is complete and may raise to cancel; on any failure
    `folder` is left as it was and no temporary folder remains.
    """
    folder = Path(folder)
    check_folder(folder, force)
    real = Path(os.path.realpath(folder))
    try:
        real.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=real.parent, prefix=f".{real.name}.new-"))
    except OSError as exc:
        raise KilnError(f"cannot write the walkthrough to {folder}: {exc.strerror}") from None
    old = None
    try:
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        if check is not None:
            check()
        tmp.chmod(0o755)  # mkdtemp makes it private; this is an ordinary folder
        if real.exists():
            old = Path(tempfile.mkdtemp(dir=real.parent, prefix=f".{real.name}.old-"))
            os.rename(real, old / "previous")
        try:
            os.rename(tmp, real)
        except OSError:
            if old is not None:
                os.rename(old / "previous", real)
            raise
    except OSError as exc:
        raise KilnError(f"cannot write the walkthrough to {folder}: {exc.strerror}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    return [folder / name for name in files]
