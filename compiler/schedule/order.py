"""Schedulers: orders of the final graph that keep peak live memory low.

Three candidates are built and the best is kept: the graph's own topological order, a
Sethi-Ullman style post-order (from the outputs, visit first the input whose subtree needs the
most memory beyond what it leaves behind), and a greedy list scheduler. When the graph is small
enough, an exact search over the sets of scheduled nodes (memoized) settles branchy regions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from compiler.ir.graph import Graph, Node
from compiler.ir.walk import post_order
from compiler.schedule.model import MemoryModel

# The exact search memoizes one entry per set of scheduled nodes; stop beyond this many.
EXACT_STATE_LIMIT = 20000


@dataclass
class Schedule:
    """A node order and what it costs.

    Attributes:
        nodes: The nodes in execution order.
        peak: Peak live bytes of that order.
        topological_peak: Peak live bytes of the graph's plain topological order.
        method: Which scheduler produced the order.
        candidates: Scheduler name -> peak it reached.
        orders: Scheduler name -> its order (the memory planner may prefer another candidate
            once in-place ops are known).
    """

    nodes: list[Node]
    peak: int
    topological_peak: int
    method: str
    candidates: dict[str, int] = field(default_factory=dict)
    orders: dict[str, list[Node]] = field(default_factory=dict)

    def pick(self, method: str) -> Schedule:
        """The same result with candidate `method` as the chosen order."""
        return Schedule(self.orders[method], self.candidates[method], self.topological_peak,
                        method, self.candidates, self.orders)


def sethi_ullman(model: MemoryModel) -> list[int]:
    """Post-order from the outputs, heaviest subtree first (Glow's child-memory ordering).

    A node's subtree need is the peak of running its inputs' subtrees one after another (the
    one leaving least behind first) while holding what the earlier ones made. Both walks are
    iterative, so chains of any depth are fine.
    """
    need: dict[int, int] = {}

    def made(i: int) -> int:
        return sum(model.sizes[s] for s in model.makes[i])

    def gain(i: int) -> int:
        return need[i] - made(i)

    preds = [sorted(p) for p in model.preds]
    for i in post_order(range(len(model.nodes)), preds.__getitem__):
        held, peak = 0, 0
        for p in sorted(model.preds[i], key=lambda p: -gain(p)):
            peak = max(peak, held + need[p])
            held += made(p)
        need[i] = max(peak, held + made(i))

    makers = {id(o): i for i, n in enumerate(model.nodes) for o in n.outputs}
    sinks = [makers[id(v)] for v in model.graph.outputs if id(v) in makers]
    outputs = set(sinks)
    sinks += [i for i in range(len(model.nodes)) if i not in outputs]
    return post_order(sinks, lambda i: sorted(model.preds[i], key=lambda p: (-gain(p), p)))


def greedy(model: MemoryModel) -> list[int]:
    """List scheduling: run next the ready node that adds the fewest net live bytes."""
    remaining = [len(p) for p in model.preds]
    users: list[list[int]] = [[] for _ in model.nodes]
    for i, preds in enumerate(model.preds):
        for p in preds:
            users[p].append(i)
    unread = [len(r) for r in model.readers]
    reads = [set() for _ in model.nodes]
    for s, rs in enumerate(model.readers):
        for r in rs:
            reads[r].add(s)
    ready = [i for i, c in enumerate(remaining) if c == 0]
    order: list[int] = []
    while ready:
        def net(i: int) -> tuple[int, int]:
            made = sum(model.sizes[s] for s in model.makes[i])
            freed = sum(model.sizes[s] for s in reads[i]
                        if unread[s] == 1 and s not in model.pinned)
            return made - freed, i
        i = min(ready, key=net)
        ready.remove(i)
        order.append(i)
        for s in reads[i]:
            unread[s] -= 1
        for u in users[i]:
            remaining[u] -= 1
            if remaining[u] == 0:
                ready.append(u)
    return order


def exact(model: MemoryModel, limit: int = EXACT_STATE_LIMIT, start: int = 0,
          window: Sequence[int] | None = None) -> list[int] | None:
    """The order of least peak, by search over scheduled-node sets; None when too many states.

    With `window`, only those nodes are ordered, after the nodes of bit mask `start` have run
    (the rest of the order is untouched, so only the window's own steps change).
    """
    window = list(range(len(model.nodes))) if window is None else list(window)
    goal = start | sum(1 << i for i in window)
    pred_mask = {i: sum(1 << p for p in model.preds[i]) for i in window}
    made = {i: sum(model.sizes[s] for s in model.makes[i]) for i in window}
    # Only storages the window makes or reads change with its order; the others add the same
    # bytes to every state, which cannot change which order is best.
    relevant = sorted({s for i in window for s in model.makes[i] + model.reads[i]})
    storages = [(model.producer[s], sum(1 << r for r in model.readers[s]), model.sizes[s],
                 s in model.pinned) for s in relevant]
    states = [0]

    def live(done: int) -> int:
        total = 0
        for p, readers, size, pinned in storages:
            if p >= 0 and not done >> p & 1:
                continue
            if pinned or readers & ~done:
                total += size
        return total

    class TooBig(Exception):
        pass

    memo: dict[int, tuple[int, int]] = {}

    def best(done: int) -> tuple[int, int]:
        if done in memo:
            return memo[done]
        states[0] += 1
        if states[0] > limit:
            raise TooBig
        if done == goal:
            return 0, -1
        base = live(done)
        result = (1 << 62, -1)
        for i in window:
            if done >> i & 1 or pred_mask[i] & ~done:
                continue
            rest, _ = best(done | 1 << i)
            result = min(result, (max(base + made[i], rest), i))
        memo[done] = result
        return result

    try:
        best(start)
    except TooBig:
        return None
    order, done = [], start
    while done != goal:
        _, i = best(done)
        order.append(i)
        done |= 1 << i
    return order


def windowed(model: MemoryModel, order: list[int], width: int = 10,
             limit: int = 2000) -> list[int]:
    """Reorder each window of `width` consecutive steps exactly (branchy regions of big graphs).

    Windows overlap by half; a window's best order never raises the peak, since the steps
    outside it see the same set of finished nodes as before.
    """
    order = list(order)
    step = max(width // 2, 1)
    done = 0  # bit mask of order[:lo]: the window reorders order[lo:lo + width] only
    for lo in range(0, max(len(order) - 1, 1), step):
        window = order[lo:lo + width]
        found = exact(model, limit, done, window)
        if found is not None:
            order[lo:lo + width] = found
        for i in order[lo:lo + step]:
            done |= 1 << i
    return order


def schedule(graph: Graph, exact_limit: int = EXACT_STATE_LIMIT) -> Schedule:
    """The best order found for `graph`, with its peak next to plain topological order's."""
    model = MemoryModel(graph)
    candidates = {"topological": list(range(len(model.nodes))),
                  "sethi_ullman": sethi_ullman(model), "greedy": greedy(model)}
    if len(model.nodes) <= 60:
        found = exact(model, exact_limit)
        if found is not None:
            candidates["exact"] = found
    if "exact" not in candidates:
        best = min(candidates.values(), key=model.peak)
        candidates["windowed"] = windowed(model, best)
    peaks = {name: model.peak(order) for name, order in candidates.items()}
    method = min(peaks, key=lambda name: (peaks[name], name != "topological"))
    orders = {name: [model.nodes[i] for i in order] for name, order in candidates.items()}
    return Schedule(orders[method], peaks[method], peaks["topological"], method, peaks, orders)
