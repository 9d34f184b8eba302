"""Which builtins the installed tflite-micro registers, asked of the package itself.

For every builtin of the TFLite schema a one-operator float model is written and handed to
tflite-micro's interpreter. An operator it does not register is refused before any kernel
runs, with "Didn't find op for builtin opcode" on its standard error; a registered one reaches
its kernel's Prepare, which fails on the bare model, or crashes the process for a few kernels
that read inputs the model leaves out. So the census runs in a child process, one builtin after
another with standard error captured per builtin, and starts a new child after the builtin a
crash names: a crash inside Prepare means the builtin was found.

`python -m tests.tflite.tflm_census` prints the census beside Kiln's own builtins.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOT_FOUND = "Didn't find op for builtin opcode"
# Not operators: a placeholder code and the escape to custom operators.
NOT_BUILTINS = {"CUSTOM", "PLACEHOLDER_FOR_GREATER_OP_CODES"}


def schema_builtins() -> list[str]:
    """Every builtin of the `tflite` package's schema, by code."""
    from tflite.utils import BUILTIN_OPCODE2NAME

    return [name for _, name in sorted(BUILTIN_OPCODE2NAME.items()) if name not in NOT_BUILTINS]


def _probe(names: list[str]) -> None:
    """In the child: print `TRY name` then `name found|missing` for each builtin in turn."""
    from tflite_micro.python.tflite_micro import runtime

    from tests.tflite.writer import Model, Op, T, write

    with tempfile.TemporaryDirectory() as folder:
        for name in names:
            print("TRY", name, flush=True)
            data = write(Model([T("x", (1, 4)), T("y", (1, 4))], [Op(name, [0], [1])],
                               [0], [1]))
            log = Path(folder) / "stderr"
            with open(log, "wb") as err:
                saved = os.dup(2)
                os.dup2(err.fileno(), 2)
                try:
                    runtime.Interpreter.from_bytes(data, arena_size=1 << 16)
                except Exception:  # a registered kernel refusing the bare model
                    pass
                finally:
                    os.dup2(saved, 2)
                    os.close(saved)
            found = NOT_FOUND not in log.read_text(errors="replace")
            print(name, "found" if found else "missing", flush=True)


def registered_builtins() -> set[str]:
    """The schema's builtins the installed tflite-micro interpreter registers."""
    names = schema_builtins()
    found: set[str] = set()
    while names:
        done = subprocess.run([sys.executable, "-m", "tests.tflite.tflm_census", "--probe",
                               *names], cwd=ROOT, capture_output=True, text=True, timeout=600)
        answered = []
        tried = None
        for line in done.stdout.splitlines():
            words = line.split()
            if len(words) == 2 and words[0] == "TRY":
                tried = words[1]
            elif len(words) == 2 and words[1] in ("found", "missing"):
                answered.append(words[0])
                if words[1] == "found":
                    found.add(words[0])
        if done.returncode == 0:
            break
        if tried is None or tried in answered:
            raise RuntimeError(f"the tflite-micro census child failed: {done.stderr[-2000:]}")
        found.add(tried)  # it crashed inside its kernel: the builtin was found
        names = names[names.index(tried) + 1:]
    return found


def main(argv: list[str]) -> int:
    if argv[:1] == ["--probe"]:
        _probe(argv[1:])
        return 0
    from compiler.frontends.tflite.builtins import CONVERTERS

    registered = registered_builtins()
    read = registered & set(CONVERTERS)
    print(f"tflite-micro registers {len(registered)} builtins; Kiln reads {len(read)} of them")
    print("not read:", " ".join(sorted(registered - set(CONVERTERS))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
