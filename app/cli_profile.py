"""`kiln profile`: every float tensor's range and histogram over calibration samples.

The measuring lives in `compiler.quant.profiler`; this module parses the arguments, shows
progress on a terminal and writes the profile.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

from app.cli_args import UsageError, Warnings, add_model_args, load_graph, writable_file
from compiler.quant.histogram import DEFAULT_BINS


def add_profile_parser(sub) -> None:
    """The `profile` subcommand's arguments."""
    profile = sub.add_parser("profile", help="record every float tensor's range over "
                                             "calibration data (a JSON profile)")
    add_model_args(profile)
    profile.add_argument("--data", required=True, metavar="DATA",
                         help="a folder of .npy files or images, an .npz or .npy file, or "
                              "'digits', 'digits:train', 'digits:test' (the 8x8 digits)")
    profile.add_argument("-o", "--output", required=True, metavar="PROFILE.json",
                         help="where to write the profile (a .yaml or .yml name writes Glow's "
                              "profile format)")
    profile.add_argument("--json", action="store_true", help="print one JSON document")
    profile.add_argument("--equalize", action="store_true",
                         help="equalize the weight ranges of consecutive convolutions first "
                              "(cross-layer equalization); the profile records it")
    profile.add_argument("--bins", type=int, default=DEFAULT_BINS, metavar="N",
                         help=f"histogram bins per tensor (default {DEFAULT_BINS}, as the "
                              "window profiles: fine enough for every --method)")
    profile.add_argument("--scale", type=float, default=1 / 255, metavar="S",
                         help="images: pixel (0..255) times S, before mean and std "
                              "(default 1/255)")
    profile.add_argument("--mean", default="0", metavar="M[,M,M]",
                         help="images: subtracted after scaling, per channel (default 0)")
    profile.add_argument("--std", default="1", metavar="S[,S,S]",
                         help="images: divided by after the mean, per channel (default 1)")
    profile.add_argument("--channels", choices=("rgb", "bgr", "gray"), default="rgb",
                         help="images: channel order (default rgb)")


def _floats(text: str, what: str) -> tuple[float, ...]:
    try:
        return tuple(float(part) for part in text.split(","))
    except ValueError:
        raise UsageError(f"{what} takes numbers separated by commas, not {text!r}") from None


def cmd_profile(args) -> int:
    """`kiln profile`: load, profile on the compiled float code, write the JSON."""
    from compiler.quant.calibration_data import Normalization, load_calibration
    from compiler.quant.glow_yaml import write_profile
    from compiler.quant.profiler import profile_model

    if not 1 <= args.bins <= 1_000_000:
        raise UsageError("--bins must be between 1 and 1,000,000")
    output = writable_file(args.output)
    graph = load_graph(args)
    normalization = Normalization(args.scale, _floats(args.mean, "--mean"),
                                  _floats(args.std, "--std"), args.channels)
    data = load_calibration(args.data, graph, normalization)
    bar, progress = contextlib.nullcontext(), None
    if sys.stderr.isatty() and not args.quiet:  # a progress bar; Ctrl+C stops between samples
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

        bar = Progress("profiling", BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                       transient=True)
        task = bar.add_task("profile", total=len(data))

        def progress(done: int, _total: int) -> None:
            bar.update(task, completed=done)
    with bar:
        profile = profile_model(graph, data, Path(args.model).name, args.bins, progress,
                                equalized=args.equalize)
    try:
        write_profile(profile, output)
    except OSError as exc:
        raise UsageError(f"cannot write {output}: {exc.strerror}") from None
    if args.json:
        print(json.dumps({"model": Path(args.model).name, "tensors": len(profile.tensors),
                          "samples": len(data), "data": data.source, "bins": profile.bins,
                          "equalized": profile.equalized, "graph_hash": profile.graph_hash,
                          "written": str(output)}))
        return 0
    Warnings(args).say(f"profiled {len(profile.tensors)} tensors of {Path(args.model).name} "
                       f"on {len(data):,} samples of {data.source}; wrote {output}")
    return 0


def add_quantize_parser(sub) -> None:
    """The `quantize` subcommand's arguments."""
    from compiler.quant.calibrate import METHODS, SCHEMAS

    quantize = sub.add_parser("quantize", help="quantize a float model with a profile; write "
                                               "a QDQ ONNX model")
    add_model_args(quantize)
    quantize.add_argument("--profile", required=True, metavar="PROFILE.json",
                          help="the profile `kiln profile` wrote for this model (JSON, or "
                               "Glow's YAML)")
    quantize.add_argument("--method", choices=METHODS, default="minmax",
                          help="how each tensor's range is chosen (default minmax)")
    quantize.add_argument("--percentile", type=float, default=99.99, metavar="P",
                          help="with --method percentile: the percent of values kept "
                               "(default 99.99)")
    quantize.add_argument("--schema", choices=SCHEMAS, default="tflite",
                          help="activations' integer form (default tflite: int8 asymmetric; "
                               "weights are symmetric per-channel int8, biases int32)")
    quantize.add_argument("--requant", choices=("tflite", "onnx"), default="tflite",
                          help="the integer operators' rounding (default tflite)")
    quantize.add_argument("--keep-float", action="append", default=[], metavar="TENSOR",
                          help="a tensor to leave in float (repeatable)")
    quantize.add_argument("--bias-correction", metavar="DATA",
                          help="measure each layer's mean output error on these samples (same "
                               "forms as kiln profile --data) and fold it into its bias")
    quantize.add_argument("-o", "--output", required=True, metavar="OUT.onnx",
                          help="the QDQ ONNX model to write")
    quantize.add_argument("--report", metavar="DATA",
                          help="compare with float on these held-out samples (same forms as "
                               "kiln profile --data): per tensor range, clipping, SQNR and "
                               "rmse/scale; output SQNR, top-1 agreement, accuracy")
    quantize.add_argument("--json", action="store_true",
                          help="print one JSON document (with --report, the report's)")
    quantize.add_argument("--plots", metavar="DIR",
                          help="with --report: save the per-tensor SQNR chart and each "
                               "tensor's histogram with its range as PNG files in DIR")


def cmd_quantize(args) -> int:
    """`kiln quantize`: profile + choices -> QDQ graph -> ONNX file, and what became integer."""
    from compiler.driver import compilation
    from compiler.frontends.onnx.export import save_onnx
    from compiler.quant.calibrate import method_note
    from compiler.quant.glow_yaml import read_profile
    from compiler.quant.recipe import QuantRecipe, quantize_with

    output = writable_file(args.output)
    if output.suffix.lower() != ".onnx":
        raise UsageError(f"-o {output}: kiln quantize writes an .onnx model")
    graph = load_graph(args)
    profile = read_profile(args.profile)
    recipe = QuantRecipe.of_profile(profile, graph, method=args.method,
                                    percentile=args.percentile, schema=args.schema,
                                    requant=args.requant, keep_float=args.keep_float)
    unknown = [n for n in recipe.keep_float if n not in profile.tensors]
    if unknown:
        raise UsageError(f"--keep-float names tensors the model does not have: {unknown}")
    corrections = None
    if args.bias_correction:
        from compiler.quant.bias_correction import bias_corrections
        from compiler.quant.calibration_data import load_calibration

        corrections = bias_corrections(graph, profile,
                                       load_calibration(args.bias_correction, graph),
                                       recipe.options)
        recipe = recipe.but(corrections=corrections)
    qdq = quantize_with(graph, recipe)
    options = recipe.options
    note = method_note(args.method, profile.bins)
    if note:
        Warnings(args).note(note)
    final = compilation(qdq).final
    integer = sum(1 for n in final.nodes if n.op.startswith(("QLinear", "QGemm")))
    try:
        save_onnx(qdq, output)
    except OSError as exc:
        raise UsageError(f"cannot write {output}: {exc.strerror}") from None
    if args.json and not args.report:
        print(json.dumps({"model": Path(args.model).name, "written": str(output),
                          "integer_operators": integer, "recipe": {
                              k: v for k, v in recipe.to_json().items() if k != "profile"}}))
    elif not args.json:
        extras = "".join([", equalized" if profile.equalized else "",
                          f", {len(corrections)} biases corrected" if corrections else ""])
        print(f"quantized {Path(args.model).name} ({args.method}, {args.schema} schema, "
              f"{args.requant} rounding{extras}): {integer} integer operators; wrote {output}")
    if args.report:
        _report(args, graph, qdq, profile, options)
    return 0


def _report(args, graph, qdq, profile, options) -> None:
    import json
    import math

    from compiler.quant.calibration_data import load_calibration
    from compiler.quant.evaluate import evaluate
    from compiler.quant.sensitivity import DEFAULT_SAMPLES, layer_sensitivity

    data = load_calibration(args.report, graph)
    report = evaluate(graph, qdq, data)
    ranking = layer_sensitivity(graph, profile, data, options)
    if args.plots:
        from app.quant_plots import save_plots

        save_plots(report, profile, Path(args.plots))
    if args.json:
        doc = report.to_json()
        doc["all_but_one"] = [
            {"float_tensor": s.tensor, "float_layer": s.layer,
             "output_sqnr_db": s.output_sqnr if math.isfinite(s.output_sqnr)
             else str(s.output_sqnr), "gain_db": s.gain if math.isfinite(s.gain) else str(s.gain)}
            for s in ranking]
        print(json.dumps(doc))
        return
    print(f"on {report.samples:,} samples of {data.source}:")
    for name, value in report.output_sqnr.items():
        print(f"  output {name}: SQNR {value:.1f} dB")
    print(f"  top-1 agreement with float {100 * report.top1_agreement:.2f} %")
    if report.accuracy_float is not None:
        print(f"  accuracy: float {100 * report.accuracy_float:.2f} %, quantized "
              f"{100 * report.accuracy_quantized:.2f} %")
    print(f"  {'tensor':28} {'min':>10} {'max':>10} {'clipped':>8} {'SQNR dB':>8} "
          f"{'rmse/scale':>10}")
    for t in report.tensors:
        print(f"  {t.name[:28]:28} {t.low:>10.4g} {t.high:>10.4g} {100 * t.clipped:>7.3f}% "
              f"{t.sqnr:>8.1f} {t.rmse_over_scale:>10.3f}")
    worst = report.worst()
    if worst is not None:
        print(f"  loses most: {worst.name} ({worst.sqnr:.1f} dB; ideal rmse/scale is 0.289)")
    if ranking:
        top = ranking[0]
        layer = f" and the weights of {top.layer}" if top.layer else ""
        print(f"  hurts the output most (all but one quantized, first {DEFAULT_SAMPLES} "
              f"samples): {top.tensor}; keeping it{layer} float gives output SQNR "
              f"{top.output_sqnr:.1f} dB ({top.gain:+.1f} dB)")
