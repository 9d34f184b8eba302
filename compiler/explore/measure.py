"""One trial: quantize by a configuration, compile for the target, count, weigh and score it.

Every figure comes from the code the other commands use: `quantize` and its bias correction,
the compile driver, the firmware and QEMU counting plugin of `kiln bench --target` (one
inference on seeded random inputs, as shipped), the flash and RAM `board_usage` checks against
a board, and the compiled host code's answers on the evaluation data (bit-exact with the
interpreter's integer path). So a point re-applied by hand gives the same numbers.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass

from compiler.driver import Options as CompileOptions
from compiler.driver import compilation
from compiler.explore.config import Config
from compiler.explore.problem import Problem
from compiler.ir.graph import Graph
from compiler.mcu.counting import inference_instructions
from compiler.quant.calibrate import choose_range
from compiler.quant.recipe import QuantRecipe, quantize_with

WEIGHTED = ("Conv", "Gemm", "MatMul", "ConvTranspose", "FullyConnected")  # as compiled
INPUT_SEED = 0  # the inputs of the counted inference, as `kiln bench --target` takes them


@dataclass(frozen=True)
class Measurement:
    """What one configuration gives: score, instructions, flash, RAM and float layers.

    `score` is accuracy on the labelled evaluation data, or top-1 agreement with the float
    model without labels (0 to 1). `fits` is True without a board.
    """

    score: float
    instructions: int
    flash: int
    ram: int
    float_layers: int
    fits: bool

    def to_json(self) -> dict:
        """Plain JSON."""
        return asdict(self)

    @classmethod
    def from_json(cls, doc: dict) -> Measurement:
        """The measurement `to_json` wrote."""
        return cls(float(doc["score"]), int(doc["instructions"]), int(doc["flash"]),
                   int(doc["ram"]), int(doc["float_layers"]), bool(doc["fits"]))


def overrides(problem: Problem, config: Config) -> dict[str, dict[str, float]]:
    """The profile overrides that give each tensor its own method's range."""
    profile = problem.profile(config.equalize)
    chosen = {}
    for tensor, method in config.methods:
        if tensor in profile.tensors and tensor not in profile.overrides:
            low, high = choose_range(profile.tensors[tensor], method)
            chosen[tensor] = {"min": low, "max": high}
    return chosen


def compile_options(config: Config, target: str) -> CompileOptions:
    """The compile driver's options for `config` on `target`."""
    return CompileOptions(target, io_in_arena=config.io_in_arena,
                          separate_kernels=not config.inline_kernels,
                          disabled_lowering=frozenset(config.disabled_lowering),
                          lean_weights=config.lean_weights)


def recipe_of(problem: Problem, config: Config,
              chosen: dict[str, dict[str, float]] | None = None) -> QuantRecipe:
    """The recipe of `config`: its profile with overrides, choices and bias corrections.

    `chosen` are its overrides when the caller has them (`overrides` otherwise). A bundle
    of the point records this recipe, so `kiln compile --build` rebuilds it.
    """
    profile = copy.deepcopy(problem.profile(config.equalize))
    profile.overrides.update(overrides(problem, config) if chosen is None else chosen)
    recipe = QuantRecipe.of_profile(profile, problem.graph, method=config.method,
                                    schema=config.schema, keep_float=config.keep_float,
                                    float_weights=config.float_weights,
                                    per_channel=config.per_channel)
    if config.bias_correction:
        from compiler.quant.bias_correction import bias_corrections

        recipe = recipe.but(corrections=bias_corrections(
            problem.graph, copy.deepcopy(profile), problem.calibration, recipe.options))
    return recipe


def quantized(problem: Problem, config: Config,
              chosen: dict[str, dict[str, float]] | None = None) -> Graph:
    """The QDQ graph of `config` (its `recipe_of`)."""
    return quantize_with(problem.graph, recipe_of(problem, config, chosen))


def float_layer_count(final: Graph) -> int:
    """Convolution, Gemm, MatMul and FullyConnected nodes the compiled graph computes in float."""
    return sum(1 for n in final.nodes if n.op in WEIGHTED)


def score_of(problem: Problem, qdq: Graph) -> float:
    """Accuracy of `qdq`'s compiled host code, or its top-1 agreement with float."""
    from compiler.explore.accuracy_control import score_of as scored
    from compiler.quant.accuracy import answers

    return scored(answers(qdq, problem.evaluation), problem.float_classes)


def measure(problem: Problem, config: Config,
            chosen: dict[str, dict[str, float]] | None = None) -> Measurement:
    """Quantize, compile for the target, count under QEMU, weigh the bundle, score.

    `chosen` are the configuration's profile overrides when the caller has them.
    """
    from compiler.codegen.bundle import footprint
    from compiler.codegen.sizes import object_sizes

    qdq = quantized(problem, config, chosen)
    compiled = compilation(qdq)
    net = compiled.net(compile_options(config, problem.spec.target))
    flash, ram = footprint(net, object_sizes(net.object))
    board = problem.board
    fits = board is None or (flash <= board.flash and ram <= board.ram)
    return Measurement(score_of(problem, qdq), inference_instructions(net, INPUT_SEED), flash, ram,
                       float_layer_count(compiled.final), fits)


def feasible(problem: Problem, measured: Measurement) -> bool:
    """Within the drop bound and, with a board, within its flash and RAM."""
    from compiler.explore.accuracy_control import within

    return measured.fits and within(problem.float_score, measured.score, problem.spec.max_drop)
