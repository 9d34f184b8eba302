"""The row schedule of a row-streamed chain: which layer computes which row, and where rows live.

A chain is a run of layers that each compute their output one row at a time from a few rows of
their inputs (convolutions, depthwise convolutions, a residual Add fused into one, a global
average pool that adds each row into its sums). Its inputs and outputs are whole tensors; a
tensor made and read only inside the chain never exists whole: its rows pass through a window
of a few rows, as MCUNetV2's patch-based inference and TinyEngine's in-place depthwise do.

Everything here is known at compile time, so the schedule is worked out once, in Python, and
the kernel replays it: a list of events (compute a row, move a window's kept rows to its
front, finish a sum). Rows are pulled on demand: a row is computed when a consumer needs it,
after the rows it needs itself. A window keeps its rows in order, one after the other, so a
kernel reads its input rows as one block; when the next row does not fit, the rows still
needed move to the front. A window with room for a few spare rows moves less often.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from compiler.errors import KilnError


@dataclass(frozen=True)
class RowInput:
    """One tensor a stage reads row by row.

    Attributes:
        value: Its value name.
        needed: Per output row of the stage, the (first, last) row of it that row reads.
        rows: Rows the tensor has.
    """

    value: str
    needed: tuple[tuple[int, int], ...]
    rows: int = 0


@dataclass(frozen=True)
class RowStage:
    """One layer of a chain.

    Attributes:
        name: Its node's name (the convolution's, when a residual Add is fused into it).
        nodes: The graph nodes it runs (a convolution and its fused Add).
        inputs: The tensors it reads by rows (the data input first, then a residual).
        output: The value it writes.
        rows: Its output rows; for a summing stage, the input rows it adds in one by one.
        row_bytes: Bytes of one output row (for a summing stage, of its whole output).
        sums: A global average pool: rows are added into int32 sums, one finish writes it.
    """

    name: str
    nodes: tuple[str, ...]
    inputs: tuple[RowInput, ...]
    output: str
    rows: int
    row_bytes: int
    sums: bool = False


@dataclass(frozen=True)
class RowEvent:
    """One step of the schedule.

    kind "row": stage `stage` computes its output row `row`; `reads` gives, per input, the
    first row it reads and that row's slot in the input's storage; `slot` is where the output
    row goes. kind "move": window `value` moves `count` rows from slot `row` to slot 0. kind
    "finish": summing stage `stage` writes its output from its sums.
    """

    kind: str
    stage: int = -1
    row: int = 0
    reads: tuple[tuple[int, int], ...] = ()
    slot: int = 0
    value: str = ""
    count: int = 0


@dataclass
class RowChain:
    """A chain, its schedule and the storages it needs.

    Attributes:
        stages: Its layers in the graph's order.
        inputs: Values read whole (made before the chain).
        input_rows: Rows of each of them.
        outputs: Values written whole (read after it, or graph outputs).
        windows: Value kept as a window -> (bytes of one row, rows it holds).
        sums: Summing stage's output value -> bytes of its int32 sums.
        events: The schedule.
        moved: Bytes the window moves copy in all.
    """

    stages: list[RowStage]
    inputs: list[str]
    outputs: list[str]
    input_rows: dict[str, int] = field(default_factory=dict)
    windows: dict[str, tuple[int, int]] = field(default_factory=dict)
    sums: dict[str, int] = field(default_factory=dict)
    events: list[RowEvent] = field(default_factory=list)
    moved: int = 0

    @property
    def window_bytes(self) -> int:
        """Bytes of all windows and sums together."""
        return sum(r * n for r, n in self.windows.values()) + sum(self.sums.values())

    def row_events(self, stage: int) -> list[RowEvent]:
        """The row events of one stage, in order."""
        return [e for e in self.events if e.kind == "row" and e.stage == stage]


def schedule_rows(stages: list[RowStage], outputs: set[str], spare: int = 0) -> RowChain:
    """The chain of `stages` with its schedule; `outputs` are the values kept whole.

    Each window holds the most rows the schedule ever keeps at once plus `spare` rows (at
    most its tensor's rows), so fewer moves happen.
    """
    made = {s.output for s in stages}
    inputs = sorted({i.value for s in stages for i in s.inputs} - made)
    for s in stages:
        for i in s.inputs:
            if any(last < first for first, last in i.needed):
                raise KilnError(f"{s.name}: an output row reads no row of {i.value}")
    held = _run(stages, outputs, None)
    rows = {s.output: s.rows for s in stages}
    windows = {v: min(n + spare, rows[v]) for v, n in held.items()}
    input_rows = {i.value: i.rows for s in stages for i in s.inputs if i.value in inputs}
    chain = RowChain(list(stages), inputs, sorted(outputs & made), input_rows)
    _run(stages, outputs, windows, chain.events)
    row_of = {s.output: s.row_bytes for s in stages}
    chain.windows = {v: (row_of[v], n) for v, n in windows.items()}
    chain.sums = {s.output: 4 * s.row_bytes for s in stages if s.sums}  # int32 per int8
    chain.moved = sum(e.count * row_of[e.value] for e in chain.events if e.kind == "move")
    return chain


def _run(stages: list[RowStage], outputs: set[str],
         capacity: dict[str, int] | None, events: list[RowEvent] | None = None
         ) -> dict[str, int]:
    """Replay the pull order; returns the most rows each window held at once.

    With `capacity`, windows hold that many rows and moves are recorded into `events`.
    """
    producer = {s.output: k for k, s in enumerate(stages)}
    readers: dict[str, list[tuple[int, int]]] = {}
    for k, s in enumerate(stages):
        for j, i in enumerate(s.inputs):
            readers.setdefault(i.value, []).append((k, j))
    # In stage order, not a set's: the windows' order is the chain's operand order, and a
    # set of names iterates differently in each process (the entry point's code, and so its
    # instruction count, changed from run to run).
    windowed = dict.fromkeys(s.output for s in stages
                             if s.output not in outputs and not s.sums)
    next_row = [0] * len(stages)
    produced = {v: 0 for v in producer}
    base = {v: 0 for v in windowed}
    held = {v: 0 for v in windowed}

    # Per reader, the lowest row it reads from each of its output rows on: with dilation or
    # uneven padding a later row may start lower than an earlier one.
    lowest = {(k, j): _suffix_minima([first for first, _ in stages[k].inputs[j].needed])
              for k, s in enumerate(stages) for j in range(len(s.inputs))}

    def kept_from(value: str) -> int:
        """The lowest row of `value` a reader still needs."""
        lows = [lowest[k, j][next_row[k]] for k, j in readers.get(value, [])
                if next_row[k] < stages[k].rows]
        return min(lows, default=produced[value])

    def slot(value: str, row: int) -> int:
        return row - base[value] if value in windowed else row

    def step(k: int) -> None:
        s, r = stages[k], next_row[k]
        for i in s.inputs:
            if i.value in producer:
                while produced[i.value] <= i.needed[r][1]:
                    step(producer[i.value])
        out = s.output
        if out in windowed:
            low = min(kept_from(out), r)
            held[out] = max(held[out], r - low + 1)
            if capacity is not None and r - base[out] >= capacity[out]:
                if low > base[out] and r > low and events is not None:
                    events.append(RowEvent("move", row=low - base[out], value=out,
                                           count=r - low))
                base[out] = low
                if r - base[out] >= capacity[out]:
                    raise KilnError(f"window of {out} holds {capacity[out]} rows, too few")
        if events is not None:
            reads = tuple((i.needed[r][0], slot(i.value, i.needed[r][0])) for i in s.inputs)
            events.append(RowEvent("row", k, r, reads, 0 if s.sums else slot(out, r)))
        next_row[k] += 1
        if not s.sums or next_row[k] == s.rows:
            produced[out] = r + 1 if not s.sums else 1
        if s.sums and next_row[k] == s.rows and events is not None:
            events.append(RowEvent("finish", k))

    sinks = [k for k, s in enumerate(stages) if s.output in outputs or s.sums]
    while True:
        open_ = [k for k in sinks if next_row[k] < stages[k].rows]
        if not open_:
            break
        step(min(open_, key=lambda k: (next_row[k] / stages[k].rows, k)))
    for k, s in enumerate(stages):
        if next_row[k] != s.rows:
            raise KilnError(f"{s.name}: the chain never computes all its rows")
    return held


def _suffix_minima(values: list[int]) -> list[int]:
    """minima[i] = min(values[i:])."""
    minima, low = [0] * len(values), None
    for i in range(len(values) - 1, -1, -1):
        low = values[i] if low is None else min(low, values[i])
        minima[i] = low
    return minima
