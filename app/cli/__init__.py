"""The `kiln` command line: one table of commands, one module per command, no Qt.

Every error a user can cause ends as one line on stderr and exit code 2 (1 for `--strict`);
`--json` prints exactly one JSON document on stdout and nothing else there. A command module
has `add_parser(sub)`, its arguments, and `run(args)`, its exit code; `COMMANDS` lists them,
and every command also takes `--quiet` and `--verbose` (added here, once).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from app.cli import (
    bench,
    diff,
    explore,
    explore_export,
    firmware,
    memory,
    passes,
    profile,
    quantize,
    report,
    tune,
    validate,
    walkthrough,
)
from app.cli import compile as compile_command
from app.cli import inspect as inspect_command
from app.cli import run as run_command
from app.cli.args import Parser, StrictFailure, UsageError
from compiler.errors import KilnError, one_line

EXIT_USAGE = 2

# The command table: name -> module with `add_parser(sub)` and `run(args)`, in `--help` order.
COMMANDS = {"inspect": inspect_command, "run": run_command, "passes": passes, "memory": memory,
            "compile": compile_command, "bench": bench, "profile": profile,
            "quantize": quantize, "diff": diff, "walkthrough": walkthrough, "report": report,
            "explore": explore, "explore-export": explore_export, "firmware": firmware,
            "validate": validate, "tune": tune}


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser: every command of the table, each with -q and -v."""
    parser = Parser(prog="kiln", description="Kiln: a workbench and ahead-of-time compiler "
                     "for neural networks on microcontrollers.")
    parser.add_argument("-V", "--version", action="store_true",
                        help="print Kiln's version and exit")
    sub = parser.add_subparsers(dest="command", parser_class=Parser)
    for module in COMMANDS.values():
        module.add_parser(sub)
    for command in sub.choices.values():  # what every command takes
        talk = command.add_mutually_exclusive_group()
        talk.add_argument("-q", "--quiet", action="store_true",
                          help="print only the result and warnings: no notes, hints, progress "
                               "or summary lines")
        talk.add_argument("-v", "--verbose", action="store_true",
                          help="also say, on stderr, how long the command took and its peak "
                               "memory")
    return parser


def wants_window(argv: Sequence[str]) -> bool:
    """Whether `argv` asks for the window: no command named (nothing, a model, a session)."""
    if argv[:1] in (["--version"], ["-V"], ["-h"], ["--help"]):
        return False
    return not argv or argv[0] not in COMMANDS


def main(argv: Sequence[str] | None = None,
         open_window: Callable[[list[str]], int] | None = None) -> int:
    """Run a `kiln` command; `open_window(argv)` runs the window when no command is named.

    Without `open_window` (`python -m app.cli`), naming no command is a usage error: this
    package never imports Qt (`app.main` is the console script, which passes the window).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    # A deep graph is hundreds of thousands of small linked objects; at the default threshold
    # the cyclic collector rescans them thousands of times (a quarter of a 20,000-node compile).
    gc.set_threshold(100_000, 50, 50)
    try:
        if argv[:1] in (["--version"], ["-V"]):
            from compiler.version import kiln_version

            print(f"kiln {kiln_version()}")
            return 0
        if argv and _looks_like_a_command(argv[0]):
            raise UsageError(_unknown_command(argv[0]))
        if wants_window(argv):
            if open_window is None:
                raise UsageError("name a command (kiln --help lists them); `kiln` alone, or "
                                 "with a model, opens the window")
            return open_window(argv)
        args = build_parser().parse_args(argv)
        started = time.perf_counter()
        try:
            return COMMANDS[args.command].run(args)
        except (UsageError, StrictFailure):
            raise
        except KilnError as exc:  # a model's error names its file, whichever stage found it
            name = Path(getattr(args, "model", "") or "").name
            if name and not str(exc).startswith(f"{name}: "):
                raise KilnError(f"{name}: {exc}") from None
            raise
        finally:
            if getattr(args, "verbose", False):
                import resource

                peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                print(f"kiln: {args.command} took {time.perf_counter() - started:.2f} s, "
                      f"peak memory {peak:,.0f} MiB", file=sys.stderr)
    except KilnError as exc:
        print(f"kiln: error: {one_line(str(exc))}", file=sys.stderr)
        return getattr(exc, "exit_code", EXIT_USAGE)
    except KeyboardInterrupt:
        print("kiln: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (kiln ... | head): stop quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:  # the last line of defence: never a traceback for the user
        if os.environ.get("KILN_DEBUG"):
            raise
        print(f"kiln: internal error: {type(exc).__name__}: {one_line(str(exc))} (set "
              "KILN_DEBUG=1 for the traceback and please report it)", file=sys.stderr)
        return 3


def _looks_like_a_command(word: str) -> bool:
    """A first word that is no command and no file: a mistyped command, not a model to open."""
    return (word not in COMMANDS and word.replace("-", "").isalpha()
            and not word.startswith("-") and not Path(word).exists())


def _unknown_command(word: str) -> str:
    import difflib

    near = difflib.get_close_matches(word, COMMANDS, n=1)
    hint = f"did you mean {near[0]}? " if near else ""
    return f"{word!r} is not a kiln command ({hint}commands: {', '.join(COMMANDS)})"
