"""The checker's streaming rule: where a streaming output may sit against its dying source.

An output streaming rows from a source (`Buffer.stream = (source, lag, lead)`) may overlap it
when it starts at least `lag` bytes below the source (rows run upwards) or at least `lead`
bytes above it (rows run downwards); anything strictly between is refused. The lag and the
lead differ here, so a rule that swaps them, accepts any placement above, or moves a bound by
one alignment step fails; the pair is listed in both orders, because the checker's sweep
meets them in list order when they start at the same step.
"""

from __future__ import annotations

import pytest

from compiler.lowir.ir import Stream
from compiler.memory import Buffer, PlanError, check_plan
from compiler.memory.plan import ArenaPlan

# (alignment, lag, lead, output size, source size): lag and lead are multiples of the
# alignment, so both bounds and one step inside them are reachable placements.
CASES = [(16, 48, 16, 80, 64), (16, 16, 48, 80, 64), (1, 7, 3, 10, 8), (1, 3, 7, 10, 8)]


def _pair(lag: int, lead: int, out_size: int, src_size: int,
          src_first: int) -> tuple[Buffer, Buffer]:
    """A source live from `src_first` to step 2 and an output streaming from it at step 2."""
    source = Buffer("src", src_size, src_first, 2)
    out = Buffer("out", out_size, 2, 4, stream=("src", lag, lead))
    return out, source


def _accepts(buffers: list[Buffer], offsets: dict[str, int], alignment: int) -> bool:
    try:
        check_plan(ArenaPlan(buffers, offsets, 1024, alignment))
    except PlanError:
        return False
    return True


def _place(out: Buffer, source: Buffer, apart: int, alignment: int) -> dict[str, int]:
    """Offsets with the output `apart` bytes above the source (below when negative)."""
    base = 4 * max(out.size, alignment)
    return {source.name: base, out.name: base + apart}


@pytest.mark.parametrize("src_first", [0, 2], ids=["source-starts-earlier", "same-first-step"])
@pytest.mark.parametrize("out_listed_first", [False, True], ids=["source-first", "out-first"])
@pytest.mark.parametrize("alignment, lag, lead, out_size, src_size", CASES)
def test_every_aligned_distance_is_judged_by_lag_below_and_lead_above(
        alignment, lag, lead, out_size, src_size, out_listed_first, src_first):
    out, source = _pair(lag, lead, out_size, src_size, src_first)
    buffers = [out, source] if out_listed_first else [source, out]
    wrong = []
    # From wholly below to wholly above, one alignment step at a time.
    for apart in range(-out_size - alignment, src_size + 2 * alignment, alignment):
        valid = apart <= -lag or apart >= lead
        if _accepts(buffers, _place(out, source, apart, alignment), alignment) != valid:
            wrong.append((apart, "should be accepted" if valid else "should be refused"))
    assert not wrong, f"lag {lag}, lead {lead}: {wrong}"


@pytest.mark.parametrize("out_listed_first", [False, True], ids=["source-first", "out-first"])
@pytest.mark.parametrize("alignment, lag, lead, out_size, src_size", CASES)
def test_the_exact_bounds_are_allowed_and_one_step_inside_is_refused(
        alignment, lag, lead, out_size, src_size, out_listed_first):
    out, source = _pair(lag, lead, out_size, src_size, 2)
    buffers = [out, source] if out_listed_first else [source, out]

    def accepts(apart: int) -> bool:
        return _accepts(buffers, _place(out, source, apart, alignment), alignment)

    assert accepts(-lag), "exactly the lag below"
    assert accepts(lead), "exactly the lead above"
    assert not accepts(-lag + alignment), "one step less than the lag below"
    assert not accepts(lead - alignment), "one step less than the lead above"


def test_a_refusal_from_above_names_the_pair_and_the_forbidden_interval():
    out, source = _pair(48, 16, 80, 64, 0)
    # 16 above is allowed (the lead), 0 is not: rows upwards would need 48 below.
    check_plan(ArenaPlan([source, out], {"src": 64, "out": 80}, 1024, 16))
    with pytest.raises(PlanError, match=r"out streams from src but sits 0 bytes from it, "
                                        r"inside \(-48, 16\)"):
        check_plan(ArenaPlan([source, out], {"src": 64, "out": 64}, 1024, 16))
    reverse, source = _pair(16, 48, 80, 64, 0)
    with pytest.raises(PlanError, match=r"sits 32 bytes from it, inside \(-16, 48\)"):
        check_plan(ArenaPlan([source, reverse], {"src": 64, "out": 96}, 1024, 16))


@pytest.mark.parametrize("apart", [-48, 16, -80, 64])
def test_a_source_still_read_after_the_streaming_step_may_not_be_overlapped(apart):
    """The rule holds only at the step the source dies; live longer, it is an ordinary pair."""
    source = Buffer("src", 64, 0, 3)  # still read at step 3
    out = Buffer("out", 80, 2, 4, stream=("src", 48, 16))
    offsets = {"src": 128, "out": 128 + apart}
    overlaps = -80 < apart < 64
    assert _accepts([source, out], offsets, 16) is not overlaps
    assert _accepts([out, source], offsets, 16) is not overlaps
    # The same placements are fine when the source dies at step 2.
    dying = Buffer("src", 64, 0, 2)
    assert _accepts([dying, out], offsets, 16)


def _clean_run(stream: Stream, apart: int, descending: bool) -> bool:
    """Run the kernel row by row, as `simulate` does: no row reads source bytes overwritten.

    The source storage starts at 0 and the output's at `apart`.
    """
    overwritten: set[int] = set()
    rows = range(len(stream.needed))
    for r in reversed(rows) if descending else rows:
        first, last = stream.needed[r]
        reads = set(range(stream.in_offset + first * stream.in_row,
                          stream.in_offset + (last + 1) * stream.in_row))
        if reads & overwritten:
            return False
        start = apart + stream.out_offset + r * stream.out_row
        overwritten.update(range(start, start + stream.out_row))
        if reads & overwritten:  # the kernel reads the window while it writes the row
            return False
    return True


PADDED_3X3 = ((0, 1), (0, 2), (1, 3), (2, 4), (3, 5), (4, 5))
KERNELS = {
    # in_offset, in_row, in_rows, out_offset, out_row, needed
    "padded-3x3": (0, 10, 6, 0, 10, PADDED_3X3),
    "stride-2": (0, 10, 6, 0, 10, ((0, 1), (1, 3), (3, 5))),
    "channels-doubled": (0, 10, 6, 0, 20, PADDED_3X3),
    "valid-5-rows": (0, 10, 8, 0, 10, ((0, 4), (1, 5), (2, 6), (3, 7))),
    "views-in-storages": (12, 10, 6, 8, 10, PADDED_3X3),
}


@pytest.mark.parametrize("kernel", KERNELS)
def test_the_rule_with_lowered_lag_and_lead_is_the_kernels_row_order(kernel):
    """Buffers carry (source, ascending lag, descending lead) as `lifetimes` builds them; at
    every byte distance the checker accepts exactly where rows upwards or downwards run clean.
    """
    in_offset, in_row, in_rows, out_offset, out_row, needed = KERNELS[kernel]
    stream = Stream("src", in_offset, in_row, in_rows, out_offset, out_row, needed)
    lag, lead = stream.ascending_lag(), stream.descending_lead()
    src_size = in_offset + in_row * in_rows
    out_size = out_offset + out_row * len(needed)
    source = Buffer("src", src_size, 0, 1)
    out = Buffer("out", out_size, 1, 2, stream=("src", lag, lead))
    wrong = []
    for apart in range(-out_size - 2, src_size + 3):
        runs = _clean_run(stream, apart, False) or _clean_run(stream, apart, True)
        offsets = _place(out, source, apart, 1)
        for buffers in ([source, out], [out, source]):
            if _accepts(buffers, offsets, 1) != runs:
                wrong.append(apart)
    assert not wrong, f"lag {lag}, lead {lead}: the checker disagrees at {sorted(set(wrong))}"
