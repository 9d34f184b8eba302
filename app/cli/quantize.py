"""`kiln quantize`: a float model and its profile become a QDQ model, with a report."""

from __future__ import annotations

import json
from pathlib import Path

from app.cli.args import UsageError, Warnings, add_model_args, load_graph, writable_file


def add_parser(sub) -> None:
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


def run(args) -> int:
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
        Warnings(args).say(f"quantized {Path(args.model).name} ({args.method}, {args.schema} "
                           f"schema, {args.requant} rounding{extras}): {integer} integer "
                           f"operators; wrote {output}")
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
        from app.quant.plots import save_plots

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
