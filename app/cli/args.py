"""What every `kiln` command shares: its usage error, reading the model, the pipeline options.

Kept apart from the commands so that command modules can share it without importing each other.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from compiler.codegen.targets import BOARDS, WEIGHT_LAYOUTS
from compiler.errors import KilnError
from compiler.lowir.passes import LOWERING_NAMES


class UsageError(KilnError):
    """A command-line argument that cannot be used as given."""


class StrictFailure(KilnError):
    """`--strict` and a warning: the command fails (exit 1) before it writes anything."""

    exit_code = 1


class Warnings:
    """What a command says besides its result: warnings, notes, hints and its summary lines.

    Warnings and notes go to stderr, each once; `--quiet` keeps only warnings; `--strict`
    turns the first warning into a failure at the command's next `check()`.
    """

    def __init__(self, args):
        self.strict = bool(getattr(args, "strict", False))
        self.quiet = bool(getattr(args, "quiet", False))
        self.lines: list[str] = []

    def warn(self, text: str) -> None:
        """A warning: on stderr always; with --strict the command will fail."""
        self.lines.append(text)
        print(f"kiln: warning: {text}", file=sys.stderr)

    def note(self, text: str) -> None:
        """A note (a choice made for the user): on stderr unless --quiet."""
        if not self.quiet:
            print(f"kiln: note: {text}", file=sys.stderr)

    def hint(self, text: str) -> None:
        """A hint (how to do better): on stderr unless --quiet."""
        if not self.quiet:
            print(f"kiln: hint: {text}", file=sys.stderr)

    def say(self, text: str) -> None:
        """A summary line on stdout, unless --quiet."""
        if not self.quiet:
            print(text)

    def check(self) -> None:
        """Fail now (StrictFailure) if --strict and anything was warned of."""
        if self.strict and self.lines:
            more = f" (and {len(self.lines) - 1} more)" if len(self.lines) > 1 else ""
            raise StrictFailure(f"--strict: {self.lines[0]}{more}; nothing was written")


def add_strict_arg(parser: argparse.ArgumentParser) -> None:
    """`--strict`: any warning (over budget, a layer left float) fails the command."""
    parser.add_argument("--strict", action="store_true",
                        help="fail (exit 1, nothing written) on any warning: a budget exceeded, "
                             "a layer of an int8 model left in float")


class Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line and exit code 2, like every other error."""

    def error(self, message: str):  # noqa: D102 - argparse override
        raise UsageError(f"{self.prog}: {message}")


def parse_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """`NAME=d0,d1,...` of `--shape` as (name, shape)."""
    name, sep, dims = text.rpartition("=")
    try:
        if not sep or not name:
            raise ValueError
        shape = tuple(int(d) for d in dims.split(",") if d.strip() != "")
        if any(d < 0 for d in shape):
            raise ValueError
    except ValueError:
        raise UsageError(f"--shape {text!r} should look like NAME=d0,d1,... with non-negative "
                         "integers") from None
    return name, shape


def parse_input(text: str) -> tuple[str, Path]:
    """`NAME=FILE.npy` of `--input` as (name, path)."""
    name, sep, path = text.rpartition("=")
    if not sep or not name or not path:
        raise UsageError(f"--input {text!r} should look like NAME=FILE.npy")
    return name, Path(path)


def writable_file(text: str, flag: str = "-o") -> Path:
    """The file an option names, refused before any work when it cannot be written there.

    A profile takes minutes of calibration; finding the folder read-only afterwards loses them.
    """
    path = Path(text)
    folder = path.parent
    if path.is_dir():
        raise UsageError(f"{flag} {path}: that is a folder; name a file in it")
    if not folder.is_dir():
        raise UsageError(f"{flag} {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: the folder {folder} is not writable")
    return path


def writable_folder(text: str, flag: str = "-o") -> Path:
    """A folder to write into (made if missing), refused before any work when it cannot be.

    The nearest folder that exists must be writable: the folder itself, or where it will be
    made. A compile or a walkthrough may take minutes; a read-only place found after is lost.
    """
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise UsageError(f"{flag} {path}: that is a file; name a folder")
    existing = next((p for p in (path, *path.absolute().parents) if p.exists()), None)
    if existing is None or not existing.is_dir():
        raise UsageError(f"{flag} {path}: {existing} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: the folder {existing} is not writable")
    return path


def load_graph(args):
    """The model named on the command line, loaded with its `--shape` overrides.

    For the commands with `--profile`, quantized with that profile on the fly.
    """
    from compiler.frontends.load import load_model

    shapes = dict(parse_shape(s) for s in args.shape or [])
    graph = load_model(args.model, shapes)
    if getattr(args, "quantize_on_load", False) and getattr(args, "profile", None):
        from compiler.quant.glow_yaml import read_profile
        from compiler.quant.recipe import QuantRecipe, quantize_with

        recipe = QuantRecipe.of_profile(read_profile(args.profile), graph, method=args.method,
                                        schema=getattr(args, "schema", "tflite"),
                                        requant=getattr(args, "requant", None) or "tflite")
        graph = quantize_with(graph, recipe)
    return graph


def add_profile_arg(parser: argparse.ArgumentParser) -> None:
    """`--profile` and `--method`: quantize the float model with a profile before the rest."""
    from compiler.quant.calibrate import METHODS, SCHEMAS

    parser.add_argument("--profile", metavar="PROFILE.json",
                        help="quantize the float model on the fly with this profile (`kiln "
                             "profile`), default schema")
    parser.add_argument("--method", choices=METHODS, default="minmax",
                        help="with --profile: how ranges are chosen (default minmax)")
    parser.add_argument("--schema", choices=SCHEMAS, default="tflite",
                        help="with --profile: the activations' integer form (default tflite)")
    parser.set_defaults(quantize_on_load=True)


def add_model_args(parser: argparse.ArgumentParser) -> None:
    """The model file and `--shape`, which every command takes."""
    parser.add_argument("model", help="the model file (.onnx or .tflite)")
    parser.add_argument("--shape", action="append", metavar="NAME=d0,d1,...",
                        help="static shape of an input whose dimensions are symbolic or unknown")



def compilation_of(args, graph=None):
    """The driver's Compilation of the model with `--pipeline` (or the default pipeline)."""
    from compiler.driver import compilation

    return compilation(graph if graph is not None else load_graph(args), pipeline_of(args))


def pipeline_of(args):
    """The pipeline `--pipeline` and `--requant` ask for, or None for the default one."""
    from compiler.passes import load_pipeline

    pipeline = load_pipeline(args.pipeline) if getattr(args, "pipeline", None) else None
    if getattr(args, "requant", None):
        pipeline = with_requant(pipeline, args.requant)
    return pipeline


def with_requant(pipeline, mode: str):
    """`pipeline` (or the default one) with its requantization rule set to `mode`."""
    from compiler.passes import Pipeline, default_pipeline

    base = pipeline or default_pipeline()
    return Pipeline(base.passes, mode)


def add_pipeline_arg(parser: argparse.ArgumentParser) -> None:
    """`--pipeline` and `--requant`, for the commands that run the passes."""
    parser.add_argument("--pipeline", metavar="FILE", help="a pipeline file (JSON) to run "
                        "instead of the default pipeline")
    parser.add_argument("--requant", choices=("onnx", "tflite"),
                        help="how integer operators requantize: onnx (float scale, ties to "
                             "even, as onnxruntime) or tflite (fixed point, as TFLite Micro); "
                             "default: the model's format decides (onnx for ONNX)")


def add_target_args(parser: argparse.ArgumentParser) -> None:
    """--target, --board and --alignment: what `compiler.driver.Options` needs of a target."""
    parser.add_argument("--target", metavar="TARGET",
                        help="a CPU target (host, x86-64, cortex-m0plus/m3/m4/m7/m33/m55, "
                             "aarch64, riscv32) or a board name (default: the board's CPU "
                             "with --board, else host)")
    parser.add_argument("--board", metavar="BOARD",
                        help="check flash and RAM use against this board's budget ("
                             + ", ".join(BOARDS) + "); over budget is a warning (an error "
                             "with --strict)")
    parser.add_argument("--board-file", metavar="BOARD.json",
                        help="your own board: a JSON file with name, target and flash and ram "
                             "sizes or memory regions (README: The command line); instead of "
                             "--board")
    parser.add_argument("--alignment", type=int, metavar="BYTES",
                        help="alignment of regions and buffers (default: the target's, 64 on "
                             "hosted CPUs and 16 on microcontrollers)")
    parser.add_argument("--disable-lowering", action="append", default=[], metavar="PASS",
                        help="compile without this lowering pass (repeatable): "
                             + ", ".join(LOWERING_NAMES) + "; `kiln passes --target` lists "
                             "what each one does")


def target_and_board(target_name: str | None, board_name: str | None,
                     board_file: str | None = None):
    """The target to compile for and the board to check, from --target, --board, --board-file.

    A board name given as --target also selects that board's budget.
    """
    from compiler.codegen.targets import BOARDS, get_target

    if board_file is not None and board_name is not None:
        raise UsageError("give --board or --board-file, not both")
    if board_name is None and target_name in BOARDS:
        board_name = target_name
    board = None
    if board_file is not None:
        from compiler.codegen.board_file import read_board_file

        board = read_board_file(board_file)
    elif board_name is not None:
        if board_name not in BOARDS:
            raise UsageError(f"--board {board_name!r} is not a known board (known: "
                             f"{', '.join(BOARDS)})")
        board = BOARDS[board_name]
    if target_name is None:
        return get_target(board.target if board else "host"), board
    target = get_target(target_name)
    if board is not None and target.name != board.target:
        flag = "--board-file" if board_file is not None else "--board"
        raise UsageError(f"--target {target_name} does not match {flag} {board.name}, whose "
                         f"CPU is {board.target}")
    return target, board


def target_options(args):
    """(driver Options, board or None) from the target, board, name and layout arguments."""
    from compiler.driver import Options

    target, board = target_and_board(args.target, args.board,
                                     getattr(args, "board_file", None))
    options = Options(target.name, getattr(args, "name", "net"), args.alignment,
                      getattr(args, "io_in_arena", False), getattr(args, "weights", "embedded"),
                      disabled_lowering=frozenset(getattr(args, "disable_lowering", ())),
                      lean_weights=WEIGHT_LAYOUTS.get(getattr(args, "weight_layout", None)))
    try:
        return options.check(), board
    except KilnError as exc:
        raise UsageError(str(exc).replace("network name", "--name", 1)
                         .replace("alignment", "--alignment", 1)
                         .replace("unknown lowering pass", "--disable-lowering: unknown lowering "
                                  "pass", 1)) from None
