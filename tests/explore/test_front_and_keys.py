"""The Pareto front over all four objectives, and configuration keys that see every field.

The front is checked against a dominance written out here over score, instructions, flash and
RAM; a key must change with each field of a configuration, or a resumed run would read back
another configuration's figures for it.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from compiler.explore.config import Config
from compiler.explore.front import best_per_objective, pareto
from compiler.explore.measure import Measurement


def _m(score, instructions, flash, ram) -> Measurement:
    return Measurement(score, instructions, flash, ram, 0, True)


def _front_by_hand(points) -> list[int]:
    """Numbers of the points no other beats: score higher, the three costs lower."""
    def beats(a, b):
        no_worse = (a.score >= b.score and a.instructions <= b.instructions
                    and a.flash <= b.flash and a.ram <= b.ram)
        better = (a.score > b.score or a.instructions < b.instructions or a.flash < b.flash
                  or a.ram < b.ram)
        return no_worse and better
    front, seen = [], set()
    for number, m in points:
        figures = (m.score, m.instructions, m.flash, m.ram)
        if figures in seen or any(beats(o, m) for _, o in points):
            continue
        seen.add(figures)
        front.append(number)
    return front


def test_ram_alone_keeps_a_point_on_the_front():
    points = [(0, _m(0.9, 100, 1000, 500)), (1, _m(0.9, 100, 1000, 400)),
              (2, _m(0.9, 100, 1100, 300))]
    # 1 beats 0 on RAM alone; 2 costs more flash than 1 but less RAM: both stay.
    assert pareto(points) == [1, 2]
    assert best_per_objective(points)["ram"] == 2


def test_the_front_matches_dominance_over_all_four_objectives():
    rng = np.random.default_rng(3)
    for _ in range(40):
        count = int(rng.integers(2, 12))
        points = [(i, _m(float(rng.choice([0.9, 0.95, 1.0])), int(rng.integers(1, 4)),
                         int(rng.integers(1, 4)), int(rng.integers(1, 4))))
                  for i in range(count)]
        assert pareto(points) == _front_by_hand(points), points


# A value other than the default for every field of a configuration.
OTHER = {"keep_float": ("a",), "float_weights": ("conv",), "method": "entropy",
         "methods": (("b", "mse"),), "equalize": True, "bias_correction": True,
         "schema": "symmetric", "per_channel": False, "io_in_arena": True,
         "disabled_lowering": ("in_place",), "lean_weights": True, "inline_kernels": False}


def test_every_configuration_field_changes_the_key():
    fields = {f.name for f in dataclasses.fields(Config)}
    assert set(OTHER) == fields, "a new field needs a value here"
    base = Config()
    keys = {base.key()}
    for name, value in OTHER.items():
        other = dataclasses.replace(base, **{name: value})
        assert other.key() != base.key(), f"the key ignores {name}"
        assert Config.from_json(other.to_json()).key() == other.key()  # read back the same
        keys.add(other.key())
    assert len(keys) == len(OTHER) + 1
    for a, b in itertools.combinations(["x", "y", "z"], 2):  # order never matters
        assert Config(keep_float=(a, b)).key() == Config(keep_float=(b, a)).key()
