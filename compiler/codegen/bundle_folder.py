"""The folder a bundle goes into: what it already holds, and swapping a new bundle in whole.

A folder holds one bundle of one target. Kiln recognizes its own bundles by their report
(NET.report.json names the network and its target), so it knows which files a new bundle
replaces: all of them, including a host bundle's main.c, Makefile and built NET_example, which
would otherwise sit beside an Arm NET.o and fail to link. Replacing the same bundle (same name,
same target) is a rebuild and needs no confirmation; replacing another bundle, or writing into a
folder of files that are not a bundle (perhaps the wrong folder), needs `force`. Files that are
not part of a bundle are never deleted, forced or not: the user's inputs or notes stay.

The new bundle is written completely into a temporary sibling folder first (inside the folder
when it is a mount point, so no rename crosses file systems). A new folder is then renamed into
place in one step. An existing folder is kept (a terminal or file manager
inside it keeps working): the old bundle's files are moved aside, the new ones renamed in, and
any error moves everything back, so a failure leaves the previous bundle as it was.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from compiler.codegen.example import GENERATED_MARK
from compiler.errors import KilnError

EXAMPLE_FILES = ("main.c", "Makefile")  # a hosted bundle's example program
# What Kiln writes beside a bundle: the hosted example, or a Cortex-M bundle's firmware
# (`compiler.mcu.firmware_folder`). Each carries GENERATED_MARK, so a user's own is kept.
GENERATED_FILES = (*EXAMPLE_FILES, "README.md", "board.ld", "sections.ld", "startup.c")
_REPORT = ".report.json"
_REPORT_LIMIT = 256 * 1024 * 1024  # a report larger than this is no report Kiln wrote
_STAGING = ".kiln-bundle-"  # the folders a write stages in (a crash may leave one behind)


def bundle_entries(name: str) -> tuple[str, ...]:
    """Every file a Kiln bundle named `name` may have, build products of its Makefile included.

    NET.build.json says how it was built (`kiln compile --build`); NET.profile.json is the
    profile an int8 export from the GUI wrote before build files carried it; NET.input.bin
    and NET.elf are a Cortex-M bundle's firmware input and image.
    """
    return (f"{name}.o", f"{name}.h", f"{name}{_REPORT}", f"{name}.weights.bin",
            f"{name}.weights.h", f"{name}.build.json", f"{name}.profile.json",
            f"{name}_example", f"{name}.input.bin", f"{name}.elf")


class FolderInUse(KilnError):
    """The output folder holds another bundle, or files that are not a bundle.

    `kind` is "bundle" (writing replaces it) or "files" (writing puts the bundle beside them).
    """

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Survey:
    """What a folder holds before a bundle is written into it.

    Attributes:
        bundles: (name, target) of each Kiln bundle found, by its report.
        owned: entries that belong to those bundles (or are Kiln's example program).
        others: every other entry; they are kept when a bundle is written.
    """

    bundles: tuple[tuple[str, str], ...] = ()
    owned: tuple[str, ...] = ()
    others: tuple[str, ...] = ()

    def conflict(self, folder: Path, name: str, target: str) -> FolderInUse | None:
        """Why writing the bundle `name` for `target` here needs force, or None when it does not.

        The same bundle (a rebuild) needs none, even beside files of the user's.
        """
        other = [f"{n} for {t}" for n, t in self.bundles if (n, t) != (name, target)]
        if other:
            what = "Kiln bundle" + ("s " if len(other) > 1 else " ")
            return FolderInUse(f"{folder} already holds the {what}{', '.join(other)}", "bundle")
        if self.others and not self.bundles:
            shown = ", ".join(self.others[:3]) + (", …" if len(self.others) > 3 else "")
            count = len(self.others)
            return FolderInUse(f"{folder} already holds {count} file{'s' * (count > 1)} that "
                               f"{'are' if count > 1 else 'is'} not part of a Kiln bundle "
                               f"({shown})", "files")
        return None


def _report_target(path: Path) -> str | None:
    """The target a Kiln report names, or None when `path` is no report Kiln wrote."""
    try:
        if not path.is_file() or path.stat().st_size > _REPORT_LIMIT:
            return None
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    stem = path.name[:-len(_REPORT)]
    if not isinstance(doc, dict) or doc.get("name") != stem:
        return None
    target = doc.get("target")
    return target if isinstance(target, str) and "triple" in doc else None


def _is_generated(path: Path) -> bool:
    """True when `path` is a file Kiln wrote (its first line carries the mark)."""
    try:
        with open(path, "rb") as f:
            return GENERATED_MARK.encode() in f.read(200)
    except OSError:
        return False


def survey(folder: str | Path) -> Survey:
    """What `folder` holds; an empty survey when it does not exist yet."""
    folder = Path(folder)
    if not folder.exists():
        return Survey()
    if not folder.is_dir():
        raise KilnError(f"output {folder} exists and is not a folder")
    try:
        entries = sorted(os.listdir(folder))
    except OSError as exc:
        raise KilnError(f"cannot read the output folder {folder}: {exc.strerror}") from None
    entries = [e for e in entries if not e.startswith(_STAGING)]
    bundles = []
    for entry in entries:
        if entry.endswith(_REPORT):
            target = _report_target(folder / entry)
            if target is not None:
                bundles.append((entry[:-len(_REPORT)], target))
    owned = {entry for name, _ in bundles for entry in bundle_entries(name)} & set(entries)
    owned |= {e for e in GENERATED_FILES if e in entries and _is_generated(folder / e)}
    return Survey(tuple(bundles), tuple(sorted(owned)),
                  tuple(e for e in entries if e not in owned))


def check_folder(folder: str | Path, name: str, target: str, force: bool = False,
                 example: bool = False, generated: Iterable[str] = ()) -> Survey:
    """Refuse a folder the bundle cannot go into; returns its survey.

    Raises KilnError when `folder` is a file or holds a file Kiln did not write under a name
    the bundle writes a program file as (the user's own code: not even force replaces it):
    main.c and Makefile for a bundle with an `example` program, and the `generated` names
    (a firmware folder's); and FolderInUse (unless `force`) when it holds another bundle or
    files that are not a bundle.
    """
    folder = Path(folder)
    held = survey(folder)
    for entry in dict.fromkeys([*(EXAMPLE_FILES if example else ()), *generated]):
        if entry in held.others and (folder / entry).is_file():
            raise KilnError(f"{folder / entry} exists and was not written by Kiln; choose "
                            "another output folder")
    conflict = held.conflict(folder, name, target)
    if conflict is not None and not force:
        raise conflict
    return held


def _move_all(names: Iterable[str], source: Path, dest: Path, done: list[str]) -> None:
    for name in names:
        os.rename(source / name, dest / name)
        done.append(name)


def _restore(folder: Path, backup: Path, moved_in: list[str], moved_aside: list[str]) -> bool:
    """Undo a swap that failed half way; False when something could not be moved back."""
    ok = True
    for name in moved_in:
        try:
            os.unlink(folder / name)
        except OSError:
            ok = False
    for name in moved_aside:
        try:
            os.rename(backup / name, folder / name)
        except OSError:
            ok = False
    return ok


def is_mount_point(folder: Path) -> bool:
    """Whether `folder` exists on another file system than its parent (a volume, a card)."""
    try:
        return folder.is_dir() and os.stat(folder).st_dev != os.stat(folder.parent).st_dev
    except OSError:
        return False


def swap_in(folder: str | Path, names: Iterable[str], write: Callable[[Path], None],
            replaced: Iterable[str] = (), check: Callable[[], None] | None = None) -> None:
    """Write a bundle with `write(temporary folder)` and swap it into `folder` whole.

    `names` are the files `write` makes; `replaced` the entries of `folder` the bundle replaces
    (the old bundle's, and any of `names`). `check` runs once the temporary folder is complete,
    before anything in `folder` changes: it may raise to cancel. On any error the folder is left
    as it was and no temporary folder remains.
    """
    folder = Path(folder)
    real = Path(os.path.realpath(folder))  # "." or a symlink: the folder it stands for
    names = list(names)
    real.parent.mkdir(parents=True, exist_ok=True)
    # Staged beside the folder, on the file system the bundle ends on; inside it when it is
    # a mount point of its own (a rename from its parent would cross devices).
    staging = real if is_mount_point(real) else real.parent
    tmp = Path(tempfile.mkdtemp(dir=staging, prefix=f"{_STAGING}new-"))
    try:
        write(tmp)
        if check is not None:
            check()
        if not real.exists():
            tmp.chmod(0o755)  # mkdtemp makes it private; a bundle folder is an ordinary one
            os.rename(tmp, real)
            return
        aside = sorted(set(replaced) | {n for n in names if os.path.lexists(real / n)})
        backup = Path(tempfile.mkdtemp(dir=staging, prefix=f"{_STAGING}old-"))
        moved_aside: list[str] = []
        moved_in: list[str] = []
        try:
            _move_all(aside, real, backup, moved_aside)
            _move_all(names, tmp, real, moved_in)
        except BaseException:
            if not _restore(real, backup, moved_in, moved_aside):
                raise KilnError(f"writing the bundle to {folder} failed and the previous "
                                f"bundle could not all be moved back; it is kept in "
                                f"{backup}") from None
            shutil.rmtree(backup, ignore_errors=True)
            raise
        shutil.rmtree(backup, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
