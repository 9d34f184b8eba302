"""Schedulers: valid topological orders, and memory-aware orders that beat the given order."""

from __future__ import annotations

from compiler.schedule import MemoryModel, schedule
from compiler.schedule.order import exact, greedy, sethi_ullman, windowed
from tests.passes.util import Builder


def _branchy():
    """Two branches from x; the given order runs both big producers before either small join.

    Branch k: x -> MatMul (big, 4 KiB) -> MatMul (4 B); the order built runs both big products
    first so both are live at once, a memory-aware order finishes one branch first.
    """
    b = Builder("branchy")
    x = b.input("x", (1, 16))
    big1 = b.node("MatMul", [x, b.weights(16, 1024, name="w1")])
    big2 = b.node("MatMul", [x, b.weights(16, 1024, name="w2")])
    small1 = b.node("MatMul", [big1, b.weights(1024, 1, name="v1")])
    small2 = b.node("MatMul", [big2, b.weights(1024, 1, name="v2")])
    return b.build(b.node("Add", [small1, small2]))


def _is_topological(model: MemoryModel, order: list[int]) -> bool:
    seen: set[int] = set()
    for i in order:
        if not model.preds[i] <= seen:
            return False
        seen.add(i)
    return sorted(order) == list(range(len(model.nodes)))


def test_memory_aware_order_beats_topological():
    graph = _branchy()
    result = schedule(graph)
    assert result.topological_peak == 64 + 4096 * 2
    assert result.peak == 64 + 4096 + 4
    assert result.peak < result.topological_peak
    assert result.method != "topological"


def test_every_scheduler_gives_a_topological_order():
    model = MemoryModel(_branchy())
    for order in (sethi_ullman(model), greedy(model), exact(model)):
        assert _is_topological(model, order)


def test_exact_search_gives_up_beyond_its_limit():
    assert exact(MemoryModel(_branchy()), limit=2) is None


def test_windowed_search_fixes_a_bad_region():
    model = MemoryModel(_branchy())
    topological = list(range(len(model.nodes)))
    better = windowed(model, topological, width=4)
    assert _is_topological(model, better)
    assert model.peak(better) == 64 + 4096 + 4 < model.peak(topological)
