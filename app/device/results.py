"""A validation's figures as the dialog's tables show them: text per cell, no Qt.

The same figures `kiln validate` prints, in the same words, so the dialog and the command
line read alike.
"""

from __future__ import annotations

from compiler.device.metrics import Closeness
from compiler.device.validate import QEMU, RANDOM_WARNING, Validation

EVALUATION_COLUMNS = ("", "acc", "rmse", "mae", "l2r", "cos")
OUTSIDE = "(entry point and calls)"


def verdict(v: Validation) -> str:
    """Passed or failed, with the first problem and how many more there are."""
    if v.passed:
        return "passed: every output the board computed matches Kiln's interpreter"
    more = f" (and {len(v.problems) - 1} more)" if len(v.problems) > 1 else ""
    return f"failed: {v.problems[0]}{more}"


def latency(v: Validation) -> str:
    """Median, min and max of one inference, in milliseconds."""
    if not v.latency_us:
        return "not measured"
    ordered = sorted(v.latency_us)
    clock = " (QEMU -icount: emulated time)" if v.port.startswith(QEMU) else ""
    return (f"median {ordered[len(ordered) // 2] / 1000:.3f} ms, min {ordered[0] / 1000:.3f}, "
            f"max {ordered[-1] / 1000:.3f} over {len(ordered)} runs{clock}")


def summary(v: Validation) -> list[tuple[str, str]]:
    """(check, result) rows: the verdict, the board, the inputs, the outputs, the latency."""
    rows = [("Checks", verdict(v)),
            ("Board", f"{v.board} ({v.target}) over {v.port}"),
            ("Firmware", f"Kiln {v.firmware_version}, network {v.network_hash} (matches)"),
            ("Inputs", f"{v.count}: {v.inputs}")]
    if v.integer_elements or not v.float_elements:
        rows.append(("Integers equal", f"{v.integer_equal:,} of {v.integer_elements:,} output "
                                       "elements equal to Kiln's interpreter"))
    if v.float_elements:
        rows.append(("Floats close", f"{v.float_close:,} of {v.float_elements:,} output "
                                     "elements within rounding of Kiln's interpreter"))
    rows.append(("Latency", latency(v)))
    unit = v.tick_unit or "ticks"
    whole = f"{v.total_ticks:,} {unit} for the entry point ({v.ticks_per_second:,} a second)"
    if v.total_instructions is not None:
        whole += f"; QEMU counted {v.total_instructions:,} instructions"
    rows.append(("One inference", whole))
    for warning in v.warnings:  # the command line's words name its option; these the form's
        rows.append(("Note", "random inputs, not the model's data: choose samples to "
                             "measure accuracy" if
                     warning == RANDOM_WARNING else warning))
    return rows


def _figures(c: Closeness, accuracy: float | None) -> list[str]:
    acc = f"{100 * accuracy:.1f}%" if accuracy is not None else "–"
    return [acc, f"{c.rmse:.3g}", f"{c.mae:.3g}", f"{c.l2r:.3g}", f"{c.cos:.6f}"]


def evaluation(v: Validation) -> list[list[str]]:
    """The interpreter and X-cross rows under `EVALUATION_COLUMNS` (a note when unmeasured)."""
    rows = []
    if v.interpreter is not None:
        rows.append(["Interpreter", *_figures(v.interpreter, v.accuracy)])
    if v.xcross is not None:
        rows.append([f"X-cross ({v.reference})", *_figures(v.xcross, v.reference_accuracy)])
    else:
        rows.append(["X-cross", f"not measured: {v.reference_note}", "", "", "", ""])
    return rows


def layer_columns(v: Validation) -> tuple[str, ...]:
    """The per-layer table's header: the counter's own unit, never "cycles" unless it is."""
    unit = v.tick_unit or "ticks"
    return (f"{unit[:1].upper()}{unit[1:]}", "Instructions", "MACs", "Layer")


def layers(v: Validation, names: list[str] | None = None
           ) -> list[tuple[int, int | None, int | None, str]]:
    """(ticks, instructions, MACs, layer) per kernel, then the entry point's own share.

    `names` (one per layer) are the shown graph's node names; else the prepared graph's.
    """
    names = names or [", ".join(la.nodes) for la in v.layers]
    rows: list[tuple[int, int | None, int | None, str]] = [
        (la.ticks, la.instructions, la.macs, f"{la.op} {name or '(driver)'}")
        for la, name in zip(v.layers, names)]
    inside = sum(la.ticks for la in v.layers)
    counted = [la.instructions for la in v.layers if la.instructions is not None]
    outside = v.total_instructions - sum(counted) if v.total_instructions is not None and \
        len(counted) == len(v.layers) else None
    rows.append((v.total_ticks - inside, outside, None, OUTSIDE))
    return rows
