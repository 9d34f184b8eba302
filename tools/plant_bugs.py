"""Plant known bugs one at a time in a copy of the project and check the tests catch each.

A test suite is only as good as the wrong code it refuses. Each plant below is a bug an audit
once slipped past the suite (or one the suite must always catch): a one-line edit, the tests
that must then fail, and why. For each, the working tree is copied (tracked and untracked,
not ignored, files), the edit made, and the named tests run with `CI=true` and the compiled
object cache off; a plant survives when they pass. The edit must match exactly once, so a
plant whose code has moved on is reported as stale rather than silently skipped.

    python tools/plant_bugs.py            # every plant
    python tools/plant_bugs.py -k vnni    # the plants whose name contains "vnni"
    python tools/plant_bugs.py --list     # names, files and tests only

Exit status 0 when every plant was caught, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Plant:
    """One bug: replace `old` by `new` in `path`; then `tests` must fail."""

    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]
    why: str


EXACTNESS = "tests/test_exactness.py"

PLANTS = (
    Plant("bias-scale-tolerance-zero", "compiler/qmath/accumulator.py",
          "off = ~(np.abs(have.astype(np.float64) - want) <= RELATIVE_TOLERANCE",
          "off = ~(np.abs(have.astype(np.float64) - want) <= 0 * RELATIVE_TOLERANCE",
          ("tests/test_build_file.py",),
          "a bias scale one ulp off input x weight scale keeps its layer float again"),
    Plant("fallback-counts-int8-weights", "compiler/driver.py",
          'if isinstance(v, Constant) and v.type.dtype == "float32")',
          'if isinstance(v, Constant) and v.type.dtype != "float32")',
          ("tests/test_build_file.py",),
          "the warning for a layer left float names the wrong number of bytes"),
    Plant("fallback-cost-halved", "app/cli/compile.py",
          "({weights - weights // 4:,} B more than int8)",
          "({weights - weights // 2:,} B more than int8)",
          ("tests/test_build_file.py",),
          "the cost of a float layer against int8 says half instead of three quarters"),
    Plant("recipe-forgets-per-tensor-weights", "compiler/quant/recipe.py",
          '"requant": self.requant, "per_channel": self.per_channel,',
          '"requant": self.requant, "per_channel": True,',
          ("tests/test_build_file.py",),
          "the build file rebuilds per-channel weights for a per-tensor export"),
    Plant("strict-never-fails", "app/cli/args.py",
          "if self.strict and self.lines:", "if self.strict and not self.lines:",
          ("tests/test_build_file.py",),
          "--strict lets a bundle over budget or with a float layer through"),
    Plant("calibration-search-never-moves", "compiler/quant/calibrate.py",
          "if value < best and not math.isclose(value, best, rel_tol=1e-12, abs_tol=0.0):",
          "if value < best - 1e-12 * abs(best):",
          ("tests/quant/test_calibration_methods.py",),
          "best starts at inf: inf - inf is NaN and entropy and MSE return min-max"),
    Plant("percentile-cut-tenfold", "compiler/quant/calibrate.py",
          "cut = (100.0 - p) / 200.0", "cut = (100.0 - p) / 20.0",
          ("tests/quant/test_calibration_methods.py",),
          "percentile cuts ten times too much from each end"),
    Plant("sqnr-20-log10", "compiler/quant/metrics.py",
          "return 10 * math.log10(signal / noise)", "return 20 * math.log10(signal / noise)",
          ("tests/quant/test_calibration_methods.py",),
          "SQNR of amplitudes instead of powers, in the report, workbench and drag estimate"),
    Plant("conv-padding-shifted", "compiler/ops/_spatial.py",
          "pads.append((b, max(tail, 0)))", "pads.append((max(b - 1, 0), max(tail + 1, 0)))",
          ("tests/test_real_models.py", "tests/compiler/test_ops_spatial.py"),
          "the reference convolution's padding moves one element (compile-driver issue)"),
    Plant("overlap-sweep-misses-a-shared-step", "compiler/memory/plan.py",
          "if other.first > b.last:", "if other.first >= b.last:",
          ("tests/memory/test_independent_check.py",),
          "buffers sharing exactly one step are never compared (compile-driver issue)"),
    Plant("streaming-overlap-from-above", "compiler/memory/plan.py",
          "if -lag < apart < lead:", "if -lag < apart <= 0:",
          ("tests/memory/test_stream_rule.py", "tests/memory/test_independent_check.py"),
          "the memory checker accepts any overlap of a streaming output above its source"),
    Plant("conv-pair-writes-past-its-window", "compiler/codegen/pair.py",
          "I32(rows.window))", "I32(rows.window + 1))",
          ("tests/codegen/test_guarded_arena.py", "tests/codegen/test_conv_pair.py"),
          "the residual pair's window fills one row late: a row of y lands past its storage"),
    Plant("vnni-conv-zero-point-fold", "compiler/codegen/lanedot.py",
          "return 128 if target is None or", "return 127 if target is None or",
          ("tests/codegen/test_int8_dot_kernels.py::"
           "test_vnni_kernels_equal_the_interpreter_on_any_avx2_cpu",),
          "the VNNI kernels fold the sign flip as 127: caught on CPUs without VNNI too"),
    Plant("lane-fc-zero-point-fold", "compiler/codegen/qfully_connected_lanes.py",
          "zx + sign_shift(target)) * rows.sum(1)", "zx + sign_shift(target) + 1) * rows.sum(1)",
          ("tests/codegen/test_int8_dot_kernels.py::test_x86_int8_kernels_equal_the_interpreter",),
          "the lane fully connected layer folds the input zero point one off, on every level"),
    Plant("pmaddwd-pair-order", "compiler/codegen/qconv_lanes.py",
          "kw_n).transpose(0, 4, 5, 2, 1, 3)", "kw_n).transpose(0, 4, 5, 2, 1, 3)[..., ::-1]",
          ("tests/codegen/test_int8_dot_kernels.py::test_x86_int8_kernels_equal_the_interpreter",
           "tests/codegen/test_cross_targets.py"),
          "the lane convolution stores each word's channel weights reversed"),
    Plant("float64-rule-addends-swapped", "compiler/codegen/requant.py",
          "acc, negative_below), down, up)", "acc, negative_below), up, down)",
          ("tests/codegen/test_requant_float64.py",),
          "the float64 tflite rule adds 1/2 + H to negative products and 1/2 - H to the rest"),
    Plant("depthwise-pairs-past-int16", "compiler/codegen/qdepthwise_dot.py",
          "np.asarray(node.inputs[3].data).min() > -128", "True",
          ("tests/codegen/test_int8_dot_kernels.py::"
           "test_host_depthwise_sums_two_taps_in_int16_only_when_no_weight_is_minus_128",),
          "two taps' int16 products are summed even where a weight of -128 can overflow int16"),
    Plant("onnx-rule-rounds-half-away", "compiler/qmath/requant.py",
          "return np.rint(value).astype(np.int64) + zero_point",
          "return (np.sign(value) * np.floor(np.abs(value) + 0.5)).astype(np.int64) + zero_point",
          ("tests/compiler/test_requant_rounding.py",),
          "the onnx rule's requantization rounds ties away from zero, not to even"),
    Plant("tflite-relu6-tie-to-even", "compiler/frontends/tflite/activation.py",
          "return zp + round_away(np.float32(x) / scale)",
          "return zp + int(np.rint(np.float32(x) / scale))",
          ("tests/tflite/test_depthwise_relu6.py",),
          "a fused RELU6's bound rounded half to even where TFLite Micro rounds away"),
    Plant("tflite-relu6-unscaled", "compiler/frontends/tflite/activation.py",
          "qmax if high is None else min(qmax, q(high))",
          "qmax if high is None else min(qmax, zp + 6)",
          ("tests/tflite/test_depthwise_relu6.py",),
          "a fused RELU6's top bound taken as 6 steps, not 6 over the scale"),
    Plant("range-undo-restores-the-newest", "app/quant/state.py",
          "self.state.set_override(self.tensor, self.before)",
          "self.state.set_override(self.tensor, self.after)",
          ("tests/gui/test_range_undo.py",),
          "undoing a range edit keeps the edited range"),
    Plant("softmax-scaled", "compiler/ops/activation.py",
          "return (e / np.sum(e, axis=axes, keepdims=True)).astype(x.dtype)",
          "return (e / np.sum(e, axis=axes, keepdims=True) * 1.0015).astype(x.dtype)",
          ("tests/compiler/test_ops_math.py",),
          "the reference softmax off by 0.15 % (compile-driver issue)"),
    Plant("conv-pair-ignores-its-switch", "compiler/lowir/lower.py",
          "for node in order if CONV_PAIR in enabled and int8_residual else ():",
          "for node in order if int8_residual else ():",
          ("tests/codegen/test_lowering_passes.py", "tests/gui/test_lowering_panel.py"),
          "switching the convolution pair off leaves it in the plan, the code and the bundle"),
    Plant("lowering-record-skips-the-target-rule", "compiler/memory/stages.py",
          "if step.steered_by and not int8_residual and step.needs:",
          "if step.steered_by and not int8_residual and not step.needs:",
          ("tests/codegen/test_lowering_passes.py",),
          "the record says the pair ran on Helium, whose target forbids it"),
    Plant("reference-engine-runs-the-float-qdq-graph", "app/cli/__init__.py",
          "graph = compiled.reference if args.stage is None else compiled.stage(args.stage)",
          "graph = graph if args.stage is None else compiled.stage(args.stage)", (EXACTNESS,),
          "kiln run's reference engine rounds a quantized model once, not as its rule (issue 50)"),
    Plant("helium-products-unfenced", "compiler/codegen/llvm.py",
          'if "+mve" in target.features:  # see helium_fence',
          'if False:  # see helium_fence', ("tests/codegen/test_helium_pow2_scales.py",),
          "LLVM aborts the process on a power-of-two Dequantize for Cortex-M55 again"),
    Plant("sigmoid-radius-one-exponent-low", "compiler/frontends/tflite/rescales.py",
          "if bound.lowest is not None and lowest < bound.lowest:",
          "if bound.lowest is not None and lowest < bound.lowest - 1:",
          ("tests/tflite/test_tflite_rescale_limits.py",),
          "a LOGISTIC whose radius TFLite Micro shifts by -1 (undefined) is accepted"),
    Plant("softmax-divides-in-float32", "compiler/ops/qtables.py",
          "quotient = entries.astype(np.float64) * output_multiplier(first(ys)) / sums",
          "quotient = entries * np.float32(output_multiplier(first(ys))) / sums",
          ("tests/quant/test_qlinear_ops.py",),
          "QLinearSoftmax divides in float32 where onnxruntime divides in float64 (issue 50)"),
    Plant("softmax-f32-quotient-uncorrected", "compiler/codegen/qsoftmax.py",
          "    return b.select(up, b.fadd(n, f32(1.0)), b.select(down, b.fsub(n, f32(1.0)), n))",
          "    return n", ("tests/codegen/test_qsoftmax_targets.py",),
          "Cortex-M4, M7 and M33 round a softmax quotient's plain float32 division"),
    Plant("float64-rint-one-bit-short", "compiler/codegen/requant.py",
          "2.0 ** 52 if isinstance(scalar, ir.DoubleType)",
          "2.0 ** 51 if isinstance(scalar, ir.DoubleType)", ("tests/quant/test_qlinear_ops.py",),
          "the inline float64 rounding adds 2**51, so a half step rounds to a half"),
    Plant("no-pair-before-a-clamp", "compiler/quant/quantize.py",
          "            chosen = _before_clamp(readers, params, keep)",
          "            chosen = None", ("tests/quant/test_quantize_for_onnxruntime.py",),
          "kiln quantize writes Conv -> Relu -> QuantizeLinear, which onnxruntime runs in float "
          "under a symmetric schema"),
    # The exactness campaign (tests/test_exactness.py) must catch each of these four.
    Plant("exact-quantize-ties-to-even", "compiler/codegen/qelementwise.py",
          'rounding = "round" if node.attrs.get("requant") == "tflite" else "rint"\n'
          "    with k.loop(", 'rounding = "rint"\n    with k.loop(', (EXACTNESS,),
          "input quantization rounds half to even under the tflite rule (TFLite rounds away)"),
    Plant("exact-requant-clamp-one-step-narrow", "compiler/codegen/requant.py",
          "return _select_min(k, _select_max(k, value, const(value, low)), const(value, high))",
          "return _select_min(k, _select_max(k, value, const(value, low)), const(value, high - 1))",
          (EXACTNESS,), "every requantization clamps one step below its upper bound"),
    Plant("exact-wrapping-rounding-add", "compiler/codegen/requant.py",
          "x = b.ashr(b.call(fn, [x, addend]), right)", "x = b.ashr(b.add(x, addend), right)",
          (EXACTNESS,), "the split tflite rule's saturating rounding add wraps instead"),
    Plant("exact-float64-past-its-reach", "compiler/codegen/requant.py",
          "    if np.any(shift[live] > 0):\n        return {}\n", "",
          (EXACTNESS,), "the float64 tables serve a layer shifting left, whose sums pass "
          "int32 once shifted (TFLite's wrap there, float64's do not)"),
)


def _copy_tree(into: Path) -> None:
    """The working tree's tracked and untracked (not ignored) files, as they are now."""
    files = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT,
                           check=True, capture_output=True).stdout.split(b"\0")
    for raw in files:
        if not raw:
            continue
        source = ROOT / raw.decode()
        if source.is_file():
            target = into / raw.decode()
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def _first_failure(output: str) -> str:
    for line in output.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            return line.split(" - ")[0].split(" ", 1)[1]
    return ""


def run_plant(plant: Plant) -> tuple[str, str, float]:
    """(verdict, the first failing test or the reason, seconds) of one plant."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kiln-plant-") as folder:
        # The copy sits where the checkout does beside the shared models, so tests that need
        # them run (without them, under CI=true, they would fail and look like a catch).
        copy = Path(folder) / ROOT.name
        shared = ROOT.parent / "shared"
        if shared.is_dir():
            (Path(folder) / "shared").symlink_to(shared, target_is_directory=True)
        _copy_tree(copy)
        target = copy / plant.path
        text = target.read_text()
        if text.count(plant.old) != 1:
            found = text.count(plant.old)
            return "STALE", f"{plant.path} holds the planted line {found} times", 0.0
        target.write_text(text.replace(plant.old, plant.new))
        env = {**os.environ, "CI": "true", "KILN_NO_CACHE": "1",
               "QT_QPA_PLATFORM": "offscreen", "PYTHONDONTWRITEBYTECODE": "1"}
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                               "-n", "2", *plant.tests], cwd=copy, env=env, capture_output=True,
                              text=True)
        seconds = time.monotonic() - start
        if done.returncode == 0:
            return "SURVIVED", "every named test passed", seconds
        failing = _first_failure(done.stdout)
        if not failing:
            return "BROKEN", done.stdout[-400:] + done.stderr[-400:], seconds
        return "caught", failing, seconds


def main(argv: list[str] | None = None) -> int:
    """Run the plants asked for and print a line each; 1 when any was not caught."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="only plants whose name contains this")
    parser.add_argument("--list", action="store_true", help="list the plants, run nothing")
    args = parser.parse_args(argv)
    chosen = [p for p in PLANTS if args.k in p.name]
    if args.list:
        for p in chosen:
            print(f"{p.name}: {p.path}; {', '.join(p.tests)} — {p.why}")
        return 0
    missed = 0
    for plant in chosen:
        verdict, detail, seconds = run_plant(plant)
        missed += verdict != "caught"
        print(f"{verdict:8} {plant.name:40} {seconds:6.0f} s  {detail}", flush=True)
    print(f"{len(chosen) - missed} of {len(chosen)} plants caught")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
