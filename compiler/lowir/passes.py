"""The lowering passes: each way lowering lets two values share bytes, named and switchable.

Lowering a scheduled graph gives every value a buffer of its own unless a pass below lets it
reuse another's. Each pass is a rule of `lower.py`, applied where its conditions hold; the
driver can switch each one off (`Options.disabled_lowering`) and records what each one did
(`compiler.memory.stages`). They run in this order: the convolution pair needs the residual
fusion of its second convolution.
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler.errors import KilnError


@dataclass(frozen=True)
class LoweringPass:
    """One lowering rule as the user sees it.

    Attributes:
        name: Its name on the command line (`--disable-lowering NAME`) and in records.
        title: A few words for lists.
        why: What it does and why it is safe, for the Passes panel and `kiln passes`.
        steered_by: The target property that can forbid it ("" when none does).
        needs: A pass that must also run for this one to find anything.
    """

    name: str
    title: str
    why: str
    steered_by: str = ""
    needs: str = ""


CONCAT_SLICES = "concat_slices"
IN_PLACE = "in_place"
RESIDUAL_IN_STORE = "residual_in_store"
CONV_PAIR = "conv_pair"
STREAMING_ROWS = "streaming_rows"
ROW_CHAINS = "row_chains"

LOWERING_PASSES: tuple[LoweringPass, ...] = (
    LoweringPass(
        CONCAT_SLICES, "Concat by placement",
        "A Concat whose slices are contiguous (every dimension before its axis is 1) has each "
        "input written straight into its slice of the output: the Concat copies nothing and "
        "its inputs need no buffers of their own."),
    LoweringPass(
        IN_PLACE, "Element-wise ops in place",
        "An element-wise op or activation writes over an input of its shape and element size "
        "that no later step reads: element i of the result reads only element i of the input."),
    LoweringPass(
        RESIDUAL_IN_STORE, "Residual Add in the convolution's store",
        "An Add of a convolution's (or fully connected layer's) result and a residual is done "
        "as that layer stores its result: the result never exists alone, and the sum is "
        "written over the residual when nothing else reads it later. For int8 (QLinearConv "
        "and QLinearAdd) the target decides: its property int8_residual_in_store is false "
        "where a separate Add runs faster (Helium).",
        steered_by="int8_residual_in_store"),
    LoweringPass(
        CONV_PAIR, "Residual block's convolutions row by row",
        "Two int8 convolutions in a row, the second adding the first one's input back, run "
        "as one kernel row by row: the first one's rows pass through a window of a few rows "
        "instead of a whole tensor, and the sum is written over the input rows no longer "
        "needed.",
        steered_by="int8_residual_in_store", needs=RESIDUAL_IN_STORE),
    LoweringPass(
        STREAMING_ROWS, "Streaming convolutions",
        "An int8 convolution writes its output row by row, each row after the input rows it "
        "needs are read: when its input dies there, the output may overlap it. The memory "
        "planner picks how far apart they start and whether the rows run upwards or "
        "downwards."),
    LoweringPass(
        ROW_CHAINS, "Row-streamed chains",
        "Where it lowers the arena's peak, a run of int8 convolutions, depthwise "
        "convolutions, residual Adds and a closing global average pool runs as one kernel, "
        "row by row: a tensor made and read inside the run never exists whole, its rows pass "
        "through a window of a few rows. Each row is computed when a later layer needs it; "
        "when a window is full, the rows still needed move to its front."),
)

LOWERING_NAMES: tuple[str, ...] = tuple(p.name for p in LOWERING_PASSES)
ALL_LOWERING: frozenset[str] = frozenset(LOWERING_NAMES)


def lowering_pass(name: str) -> LoweringPass:
    """The lowering pass called `name` (KilnError naming the known ones otherwise)."""
    for p in LOWERING_PASSES:
        if p.name == name:
            return p
    raise KilnError(f"unknown lowering pass {name!r}; the lowering passes are "
                    + ", ".join(LOWERING_NAMES))


def check_lowering_names(names) -> frozenset[str]:
    """`names` as a frozenset, after refusing any that is not a lowering pass."""
    for name in names:
        lowering_pass(name)
    return frozenset(names)


def effective_lowering(enabled, int8_residual: bool) -> frozenset[str]:
    """The passes that can apply: a pass whose need is off, or that the target forbids, drops.

    Equal sets lower alike, so plans are cached by this set.
    """
    enabled = set(enabled)
    if not int8_residual:
        enabled.discard(CONV_PAIR)  # the pair's sum is an int8 residual in the store
    for p in LOWERING_PASSES:
        if p.needs and p.needs not in enabled:
            enabled.discard(p.name)
    return frozenset(enabled)
