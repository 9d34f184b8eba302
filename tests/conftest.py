"""Shared fixtures: the third-party models folder (skip without it, fail under CI)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_MODELS = ROOT.parent / "shared" / "models"
SAMPLE_MODEL = ROOT / "app" / "resources" / "models" / "digits_cnn.onnx"


def shared_models() -> Path:
    """The shared models folder; skips the test when absent, fails instead under CI."""
    if not (SHARED_MODELS / "onnx").is_dir():
        message = "third-party models folder ../shared/models (beside the project) not found"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + "; CI must have it")
        pytest.skip(message)
    return SHARED_MODELS


def require_tools(*tools: str) -> None:
    """Skip (with the reason) when a program a test runs is missing; under CI=true, fail."""
    import shutil

    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        message = f"{' and '.join(missing)} not found on PATH (`make test` installs the Debian " \
                  "packages it needs when run as root)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + "; CI must have it")
        pytest.skip(message)


def require_module(name: str, why: str):
    """Import `name`, or skip saying `why` it may be absent; under CI=true, fail."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        message = f"Python module {name} is not installed ({why})"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + "; CI must have it")
        pytest.skip(message)


@pytest.fixture
def c_compiler() -> None:
    """A test that compiles C: `cc` (and `make`) must be there."""
    require_tools("cc", "make")


@pytest.fixture
def models_dir() -> Path:
    """Fixture form of shared_models()."""
    return shared_models()


# What Ray and NNCF leave in the home folder when run carelessly: Ray's token makes the user's
# later `ray start` clusters demand one, NNCF's telemetry folder is clutter. Tests that run them
# set HOME to a temporary folder; these must not appear during a run that did not find them.
HOME_LITTER = (Path.home() / ".ray" / "auth_token", Path.home() / "intel")
_WATCHED = [path for path in HOME_LITTER if not path.exists()]


def _new_litter() -> list[Path]:
    """Watched paths that appeared; each is reported once, then no longer watched."""
    appeared = [path for path in _WATCHED if path.exists()]
    _WATCHED[:] = [path for path in _WATCHED if path not in appeared]
    return appeared


@pytest.fixture(autouse=True)
def _home_stays_clean():
    """Fail the test during which Ray's token or NNCF's folder appeared in the real home."""
    yield
    appeared = _new_litter()
    if appeared:
        pytest.fail(f"{' and '.join(map(str, appeared))} appeared in the home folder during "
                    "this test (or one running beside it): run Ray and NNCF with HOME set to "
                    "a temporary folder", pytrace=False)


def pytest_sessionfinish(session) -> None:
    """Fail the session when the litter appeared outside any test (a fixture, a plugin)."""
    appeared = _new_litter()
    if appeared:
        print(f"\n{' and '.join(map(str, appeared))} appeared in the home folder during the "
              "test session", file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_collection_modifyitems(items) -> None:
    """Run the modules that hold long tests (marked `slow`) first, each module kept whole.

    pytest-xdist hands tests out in this order: a long test that starts last keeps one worker
    busy while the other has nothing left, and `make test` (`--dist worksteal`) lets the idle
    worker take the short tests queued behind the long ones. Modules stay contiguous so their
    module-scoped fixtures (the standalone package build, the fuzz oracle) are made once.
    """
    first = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in first)  # stable: the rest keeps its order


def pytest_terminal_summary(terminalreporter) -> None:
    """Print the breadth counts tests measured, then the kernels run here (_kernel_summary)."""
    counts = [value for reports in terminalreporter.stats.values() for report in reports
              if getattr(report, "when", None) == "call"
              for key, value in getattr(report, "user_properties", ())
              if key in ("onnx_breadth", "tflm_census")]
    if counts:
        terminalreporter.section("operator breadth measured in this run")
        for value in counts:
            terminalreporter.line(str(value))
    _kernel_summary(terminalreporter)


def _kernel_summary(terminalreporter) -> None:
    """Say which levels' kernels ran here, and name the tests only compiled for want of features.

    Such tests record a `kernels` property (`record_property`, which reaches this process from
    pytest-xdist's workers too): "ran <level>", or why not. Silent when none recorded it.
    """
    notes = [(report.nodeid.split("::")[-1], value)
             for reports in terminalreporter.stats.values() for report in reports
             if getattr(report, "when", None) == "call"
             for key, value in getattr(report, "user_properties", ()) if key == "kernels"]
    if not notes:
        return
    terminalreporter.section("kernels run and kernels only compiled on this CPU")
    ran: dict[str, int] = {}
    not_run: dict[str, list[str]] = {}
    for test, value in notes:
        if value.startswith("ran "):
            ran[value[4:]] = ran.get(value[4:], 0) + 1
        else:
            not_run.setdefault(value, []).append(test)
    terminalreporter.line("ran: " + (", ".join(f"{n} tests on {level}"
                                                for level, n in sorted(ran.items())) or "none"))
    if not not_run:
        terminalreporter.line("compiled only: none")
    for reason, tests in sorted(not_run.items()):
        terminalreporter.line(f"{len(tests)} tests, {reason}:")
        for test in sorted(tests):
            terminalreporter.line(f"  {test}")


@pytest.fixture(scope="module")
def oracle():
    """onnxruntime and TFLite Micro in a process of their own (`tests.quant_fuzz.oracle`), one
    per test module and worker, ended after the module."""
    from tests.quant_fuzz.oracle import Oracle

    require_module("onnxruntime", "the test extra installs it")
    runner = Oracle()
    yield runner
    runner.close()
