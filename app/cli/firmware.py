"""`kiln firmware`: the runner firmware (the network, the protocol runner, a board's port).

The building lives in `compiler.device.runner_firmware`; this module declares the command's
arguments and says what it wrote.
"""

from __future__ import annotations

import json
from pathlib import Path

from app.cli.args import UsageError, add_model_args, compilation_of, writable_folder


def add_parser(sub) -> None:
    """The `firmware` subcommand's arguments."""
    firmware = sub.add_parser("firmware", help="build the runner firmware: the model, Kiln's "
                                               "MLPerf-Tiny-protocol runner and a board's port "
                                               "(ELF, BIN, map, sources, Makefile, CMake)")
    add_model_args(firmware)
    firmware.add_argument("--target", required=True, metavar="CORE",
                          help="the Cortex-M core (cortex-m3, cortex-m4, cortex-m7, "
                               "cortex-m33, cortex-m55)")
    firmware.add_argument("--board", metavar="BOARD",
                          help="the board (default: QEMU's board of the core); a board QEMU "
                               "does not emulate gets the port template to fill in")
    firmware.add_argument("--port-template", action="store_true",
                          help="build with kiln_port_template.c, the port for your own board, "
                               "instead of the QEMU port")
    firmware.add_argument("--model-id", metavar="ID",
                          help="what `profile` answers as m-model-[ID] (default: the model "
                               "file's name; MLPerf Tiny's are ic01, kws01, vww01, ad01)")
    firmware.add_argument("-o", "--output", required=True, metavar="DIR",
                          help="the folder to write (made if missing)")
    firmware.add_argument("--force", action="store_true",
                          help="overwrite files in DIR changed since Kiln wrote them (a port "
                               "filled in, an edited Makefile)")
    firmware.add_argument("--json", action="store_true", help="print what was built as JSON")


def run(args) -> int:
    """`kiln firmware`: compile the timed build and build the firmware folder."""
    from compiler.codegen.targets import BOARDS, get_target
    from compiler.device import runner_firmware
    from compiler.device.validate import runner_net

    target = get_target(args.target)
    if not target.mcu or not target.name.startswith("cortex-m"):
        raise UsageError(f"--target {args.target}: the runner firmware is for Cortex-M cores")
    board = None
    if args.board:
        if args.board not in BOARDS:
            raise UsageError(f"--board {args.board}: not a known board ({', '.join(BOARDS)})")
        board = BOARDS[args.board]
        if board.target != target.name:
            raise UsageError(f"--board {args.board} has a {board.target}, not a {target.name}")
    folder = writable_folder(args.output)
    net = runner_net(compilation_of(args), target.name)
    row = runner_firmware.linked_board(target.name, board)
    port = runner_firmware.TEMPLATE_PORT if args.port_template or (
        board is not None and board.qemu_machine is None) else None
    built = runner_firmware.build(net, board or row, folder, args.model, args.model_id or "",
                                  port, args.force)
    manifest = json.loads((folder / runner_firmware.MANIFEST).read_text())
    if args.json:
        print(json.dumps({**manifest, "folder": str(folder)}))
        return 0
    name = Path(args.model).name
    model = Path(args.model).resolve()
    print(f"{name}: runner firmware for {target.name} on {(board or row).name} in {folder}")
    print(f"  {runner_firmware.ELF}, {runner_firmware.BIN}, {runner_firmware.MAP}: "
          f"{manifest['flash_bytes']:,} B flash, {manifest['ram_bytes']:,} B RAM "
          f"(linked for {row.name})")
    print(f"  port       {built.port}")
    print(f"  network    {manifest['network_hash']}, every kernel timed "
          f"({runner_firmware.model_source.layer_slots(net) - 1} counters)")
    if built.port == runner_firmware.QEMU_PORT:
        print(f"  run        make -C {folder} run TCP_PORT=5555, then kiln validate {model} "
              f"--target {target.name} --port socket://127.0.0.1:5555")
    else:
        print(f"  next       copy {runner_firmware.TEMPLATE_PORT} to my_port.c in {folder}, "
              f"fill in its functions for your board (README.md says how), then make -C "
              f"{folder} PORT=my_port.c")
    return 0
