"""The product's firmware builder (`compiler.mcu.firmware`) as tests use it.

Missing tools skip (a failure under CI=true); a failed build or run fails the test with the
product's message.
"""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from compiler.errors import KilnError
from compiler.mcu import firmware as _firmware
from compiler.mcu.firmware import (  # noqa: F401  (re-exported)
    MACHINES,
    board_for,
    main_c,
    placement,
)


def require_tools() -> None:
    """Skip when the cross compiler or QEMU is missing; under CI=true that is a failure."""
    missing = _firmware.missing_tools()
    if missing:
        message = (f"{' and '.join(missing)} not found (Debian packages: "
                   f"{_firmware.PACKAGES}; `make test` installs them when run as root)")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + "; CI must have them")
        pytest.skip(message)


def _failing(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except KilnError as exc:
            pytest.fail(str(exc))
    return wrapper


build = _failing(_firmware.build)
run = _failing(_firmware.run)
parse_outputs = _failing(_firmware.parse_outputs)


def outputs_on(net, feeds: dict, machine: str, folder: Path) -> dict[str, np.ndarray]:
    """`net` built into firmware for QEMU's `machine` with `feeds`, run: its outputs."""
    folder.mkdir(parents=True, exist_ok=True)
    elf = build(net, main_c(net, feeds), machine, folder)
    stdout, _ = run(elf, machine)
    return parse_outputs(net, stdout)


def outputs_of_each(net, feeds: list[dict], target: str, folder: Path
                    ) -> list[dict[str, np.ndarray]]:
    """`net` run once per feed dict in one firmware on `target`'s emulated board: the outputs
    of each inference. A failed build or run is the product's KilnError (callers record it)."""
    machine = _firmware.board_for(target).qemu_machine
    elf = _firmware.build(net, main_c(net, feeds), machine, folder)
    stdout, _ = _firmware.run(elf, machine)
    return [_firmware.parse_outputs(net, stdout, k) for k in range(len(feeds))]


def assert_exact(net, graph, feeds: dict, machine: str, folder: Path, what: str = "") -> None:
    """`net` run under QEMU gives the reference interpreter's bytes on `graph`, output by output."""
    from compiler.interpreter import run as interpret

    got = outputs_on(net, feeds, machine, folder)
    for name, value in interpret(graph, feeds).items():
        assert np.array_equal(got[name], value), f"{what} output {name}".strip()


def readme_commands(readme: str, section: str) -> list[str]:
    """The shell lines of the first ```sh block under the README's `## section` heading."""
    assert f"## {section}\n" in readme, f"the README has no {section!r} section"
    body = readme.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    assert "```sh\n" in body, f"the README's {section!r} section gives no commands"
    block = body.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def run_as_a_user(commands: list[str], folder) -> str:
    """Run each command in `folder` as typed in a shell; the stdout of the last one."""
    done = None
    for line in commands:
        done = subprocess.run(line, shell=True, cwd=folder, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, f"{line}: {done.stderr[-2000:]}"
    return done.stdout
