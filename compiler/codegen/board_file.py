"""A user's own board, described in JSON: the budget `--board-file` checks a bundle against.

A firmware team's part is rarely one of Kiln's known boards. The file names the board and its
CPU target and gives its flash and RAM, either as sizes or as memory regions (each with a
name, a kind, "flash" or "ram", an origin and a size, as a linker script lists them), whose
sizes then add up to the budget:

    {"name": "acme-sensor", "target": "cortex-m4",
     "regions": [{"name": "FLASH", "kind": "flash", "origin": 134217728, "size": 524288},
                 {"name": "SRAM1", "kind": "ram", "origin": 536870912, "size": 131072},
                 {"name": "SRAM2", "kind": "ram", "origin": 536936448, "size": 32768}]}

A board file of a known board's name is refused: it would shadow the board everyone knows.
"""

from __future__ import annotations

import json
from pathlib import Path

from compiler.codegen.targets import BOARDS, Board, get_target
from compiler.errors import KilnError

_KINDS = ("flash", "ram")
_KEYS = {"name", "target", "flash", "ram", "regions", "qemu_machine", "flash_origin",
         "ram_origin", "cflags"}


def _size(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{what} must be a positive whole number of bytes, not {value!r}")
    return value


def _regions(entries) -> dict[str, int]:
    """Bytes of flash and of RAM the regions add up to."""
    if not isinstance(entries, list) or not entries:
        raise ValueError("regions must be a non-empty list")
    totals = dict.fromkeys(_KINDS, 0)
    for i, region in enumerate(entries):
        if not isinstance(region, dict):
            raise ValueError(f"region {i} is not an object")
        label = region.get("name", i)
        if region.get("kind") not in _KINDS:
            raise ValueError(f"region {label!r} has kind {region.get('kind')!r}, not flash or "
                             "ram")
        if "origin" in region and (isinstance(region["origin"], bool)
                                   or not isinstance(region["origin"], int)
                                   or region["origin"] < 0):
            raise ValueError(f"region {label!r} has an origin that is no address")
        totals[region["kind"]] += _size(region.get("size"), f"region {label!r} size")
    return totals


def board_from_json(doc, where: str = "the board file") -> Board:
    """The board a JSON document describes; KilnError saying what is wrong in one sentence."""
    try:
        if not isinstance(doc, dict):
            raise ValueError("it must hold a JSON object")
        unknown = sorted(set(doc) - _KEYS)
        if unknown:
            raise ValueError(f"unknown keys {unknown} (known: {', '.join(sorted(_KEYS))})")
        name = doc.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ValueError("it names no board (\"name\")")
        target = doc.get("target")
        if not isinstance(target, str):
            raise ValueError("it names no CPU target (\"target\")")
        get_target(target)
        totals = _regions(doc["regions"]) if "regions" in doc else {}
        flash = _size(doc.get("flash", totals.get("flash") or None), "flash")
        ram = _size(doc.get("ram", totals.get("ram") or None), "ram")
        cflags = doc.get("cflags", [])
        if not isinstance(cflags, list) or not all(isinstance(f, str) for f in cflags):
            raise ValueError("cflags must be a list of strings")
        board = Board(name, target, flash, ram, doc.get("qemu_machine"),
                      doc.get("flash_origin"), doc.get("ram_origin"), tuple(cflags))
    except (ValueError, TypeError) as exc:
        raise KilnError(f"{where}: {exc}") from None
    except KilnError as exc:
        raise KilnError(f"{where}: {exc}") from None
    known = BOARDS.get(board.name)
    if known is not None and known != board:
        raise KilnError(f"{where}: {board.name!r} is a known board with other sizes; give "
                        "yours another name")
    return board


def read_board_file(path: str | Path) -> Board:
    """The board of a JSON file (`--board-file`), or one sentence saying why not."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise KilnError(f"{path}: cannot read the board file ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise KilnError(f"{path}: not a JSON board file ({exc})") from None
    return board_from_json(doc, str(path))
