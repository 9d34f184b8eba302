"""What keeping one tensor in float costs an int8 model: arena, flash, RAM, MACs, instructions.

Keeping a tensor float leaves the layers around it float too, with float32 weights, float
activations four times wider and float arithmetic: one 1x1 convolution kept float grew one
model's arena from 35,904 B to 266,240 B. The Quantization dock shows the cost beside its
Keep float box. Both models are quantized with the document's recipe, one with the tensor
kept float and one without, and compiled for the target as the export compiles them, so the
figures are the bundles' own.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from compiler.codegen.bundle import footprint as bundle_footprint
from compiler.codegen.sizes import object_sizes
from compiler.driver import Options, compilation, float_fallbacks
from compiler.ir.graph import Graph
from compiler.mcu.counting import inference_instructions
from compiler.passes.pipeline import Pipeline
from compiler.quant.recipe import QuantRecipe, quantize_with
from compiler.stats import node_macs


@dataclass(frozen=True)
class Footprint:
    """One compiled int8 model's memory and float work, as its bundle has them.

    Attributes:
        arena: Bytes of the activation arena (the memory plan's).
        flash: Code, read-only data and weights (what `--board` checks against flash).
        ram: Data, bss, the mutable region and the arena (what it checks against RAM).
        float_macs: Multiply-accumulates computed in float32.
        float_layers: The weighted layers left float (Conv, Gemm, MatMul, ...).
    """

    arena: int
    flash: int
    ram: int
    float_macs: int
    float_layers: tuple[str, ...]


@dataclass(frozen=True)
class FloatCost:
    """The footprints of an int8 model with `tensor` quantized and with it kept float."""

    tensor: str
    target: str
    quantized: Footprint
    kept: Footprint
    instructions: tuple[int, int] | None = None  # one inference, quantized and kept float
    instructions_note: str = ""  # why they are not counted, or that they are being counted

    @property
    def layers(self) -> tuple[str, ...]:
        """The weighted layers that stay float only because the tensor does."""
        return tuple(n for n in self.kept.float_layers if n not in self.quantized.float_layers)

    def text(self) -> str:
        """One sentence for the dock: each figure's change, then quantized -> kept float."""
        q, k = self.quantized, self.kept

        def change(label: str, a: int, b: int, unit: str) -> str:
            return f"{label} {b - a:+,}{unit} ({a:,} → {b:,})"

        layers = ", ".join(self.layers) or "none"
        return (f"Keeping {self.tensor} float on {self.target}: "
                + ", ".join([change("arena", q.arena, k.arena, " B"),
                             change("flash", q.flash, k.flash, " B"),
                             change("RAM", q.ram, k.ram, " B"),
                             change("float MACs", q.float_macs, k.float_macs, ""),
                             *([change("instructions", *self.instructions, "")]
                               if self.instructions else [])])
                + f"; layers it leaves float: {layers}."
                + (f" Instructions: {self.instructions_note}." if self.instructions_note
                   and not self.instructions else ""))


def footprint(graph: Graph, recipe: QuantRecipe, options: Options,
              pipeline: Pipeline | None = None) -> Footprint:
    """The footprint of the int8 model `recipe` makes of the float `graph`, compiled."""
    compiled = compilation(quantize_with(graph, recipe), pipeline)
    net = compiled.net(options)
    flash, ram = bundle_footprint(net, object_sizes(net.object))
    macs = node_macs(compiled.prepared)
    floating = sum(macs.get(node.id) or 0 for node in compiled.prepared.nodes
                   if node.outputs and node.outputs[0].type.dtype == "float32")
    return Footprint(net.plan.arena.size, flash, ram, floating,
                     tuple(layer for layer, _ in float_fallbacks(compiled)))


def keep_float_cost(graph: Graph, recipe: QuantRecipe, tensor: str, options: Options,
                    pipeline: Pipeline | None = None) -> FloatCost:
    """What keeping `tensor` float costs the int8 model of `graph` and `recipe` on a target.

    Whether the recipe keeps it float or not, one model quantizes it and the other keeps it
    float; every other choice of the recipe is the same in both. Compiles both (seconds on a
    big model: call it off the GUI thread).
    """
    without, with_it = _both(recipe, tensor)
    return FloatCost(tensor, options.resolved_target().name,
                     footprint(graph, without, options, pipeline),
                     footprint(graph, with_it, options, pipeline))


def _both(recipe: QuantRecipe, tensor: str) -> tuple[QuantRecipe, QuantRecipe]:
    """The recipe with `tensor` quantized and with it kept float, all else the same."""
    kept = set(recipe.keep_float) | set(recipe.profile.keep_float)
    others = [t for t in recipe.profile.keep_float if t != tensor]
    without = recipe.but(profile=replace(recipe.profile, keep_float=others),
                         keep_float=tuple(t for t in recipe.keep_float if t != tensor))
    with_it = recipe if tensor in kept else recipe.but(
        keep_float=(*recipe.keep_float, tensor))
    return without, with_it


def keep_float_instructions(graph: Graph, recipe: QuantRecipe, tensor: str, options: Options,
                            pipeline: Pipeline | None = None) -> tuple[int, int]:
    """Instructions of one inference with `tensor` quantized and kept float, under QEMU.

    The counts `kiln bench --target` gives: the shipped build on the target's emulated board
    (KilnError without the cross tools or a board for the target). Seconds to a minute.
    """
    return tuple(inference_instructions(compilation(quantize_with(graph, r), pipeline).net(
        options)) for r in _both(recipe, tensor))
