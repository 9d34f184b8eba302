"""The search space: which knobs a trial may turn, as Optuna parameters, and back to a Config.

Per-layer precision follows accuracy control's ranking: the first k tensors of it are kept
float (and the weighted layers reading them compute in float), k from none to two past the
count accuracy control needed. Trying each tensor's precision on its own would spend most
trials on points with half the network in float. Each int8 tensor has its calibration method
("default" follows the global one); then the global
method, cross-layer equalization (when the model has layers to balance), bias correction, the
schema, per-channel weights, and the compile options that change cost on the target: the
inputs and outputs in the arena, each lowering pass that can be switched off, the weight
layout on DSP cores and kernel inlining.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from compiler.codegen.targets import DotProduct, get_target
from compiler.explore.accuracy_control import readers
from compiler.explore.config import Config
from compiler.ir.graph import Graph
from compiler.lowir.passes import LOWERING_PASSES
from compiler.quant.calibrate import METHODS

# Schemas every int8 target computes with its fast kernels; uint8 and the power-of-two scales
# are left to a hand-made configuration (uint8 runs several times slower on Cortex-M).
SEARCHED_SCHEMAS = ("tflite", "symmetric")


@dataclass(frozen=True)
class Space:
    """The knobs of one problem: its quantized tensors and what the target lets vary."""

    tensors: tuple[str, ...]  # accuracy control's ranking: reverted first, then worst first
    readers: dict  # tensor -> the weighted nodes reading it
    reverted: int  # how many tensors accuracy control kept float
    equalize: bool
    dsp_weights: bool

    @property
    def most_float(self) -> int:
        """The largest number of tensors a trial keeps float."""
        return min(len(self.tensors), self.reverted + 2)

    def suggest(self, trial) -> Config:
        """A Config from an Optuna trial (ask-and-tell: the trial's suggest_* calls)."""
        count = trial.suggest_int("float_count", 0, self.most_float) if self.most_float else 0
        keep = list(self.tensors[:count])
        weights = [n for t in keep for n in self.readers.get(t, ())]
        methods = []
        for i, tensor in enumerate(self.tensors):
            chosen = trial.suggest_categorical(f"method:{i}", ("default",) + METHODS)
            if chosen != "default" and tensor not in keep:
                methods.append((tensor, chosen))
        disabled = tuple(p.name for p in LOWERING_PASSES
                         if not trial.suggest_categorical(f"lower:{p.name}", (True, False)))
        method = trial.suggest_categorical("method", METHODS)
        return Config(
            keep_float=tuple(keep), float_weights=tuple(weights), method=method,
            methods=tuple(methods),
            equalize=trial.suggest_categorical("equalize", (False, True)) if self.equalize
            else False,
            bias_correction=trial.suggest_categorical("bias_correction", (False, True)),
            schema=trial.suggest_categorical("schema", SEARCHED_SCHEMAS),
            per_channel=trial.suggest_categorical("per_channel", (True, False)),
            io_in_arena=trial.suggest_categorical("io_in_arena", (False, True)),
            disabled_lowering=disabled,
            lean_weights=trial.suggest_categorical("lean_weights", (False, True))
            if self.dsp_weights else None,
            inline_kernels=trial.suggest_categorical("inline_kernels", (True, False)),
        ).normalized()

    def params(self, config: Config) -> dict:
        """The Optuna parameters that make `config` (to enqueue a known point)."""
        methods = dict(config.methods)
        count = len(config.keep_float)
        if set(config.keep_float) != set(self.tensors[:count]) or count > self.most_float:
            raise ValueError("the configuration keeps float tensors off the ranking")
        params = {"float_count": count} if self.most_float else {}
        for i, tensor in enumerate(self.tensors):
            params[f"method:{i}"] = methods.get(tensor, "default")
        for p in LOWERING_PASSES:
            params[f"lower:{p.name}"] = p.name not in config.disabled_lowering
        params.update(method=config.method, bias_correction=config.bias_correction,
                      schema=config.schema, per_channel=config.per_channel,
                      io_in_arena=config.io_in_arena, inline_kernels=config.inline_kernels)
        if self.equalize:
            params["equalize"] = config.equalize
        if self.dsp_weights:
            params["lean_weights"] = bool(config.lean_weights)
        return params

    def base(self, equalize: bool = False) -> Config:
        """Every tensor int8, the target's fastest weight layout, the rest as by default."""
        return Config(lean_weights=False if self.dsp_weights else None, equalize=equalize)

    def start(self) -> Config:
        """`base` with the tensors accuracy control reverted kept float."""
        keep = self.tensors[:self.reverted]
        return replace(self.base(), keep_float=keep, float_weights=tuple(
            n for t in keep for n in self.readers.get(t, ()))).normalized()


def space_for(graph: Graph, ranking, reverted: int, target: str, can_equalize: bool) -> Space:
    """The space of `graph` on `target`, its tensors in accuracy control's `ranking`."""
    tensors = tuple(dict.fromkeys(ranking))
    dsp = get_target(target).int8_dot is DotProduct.DSP
    return Space(tensors, {t: readers(graph, t) for t in tensors}, reverted, can_equalize,
                 dsp)
