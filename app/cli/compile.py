"""`kiln compile`: a model into a bundle, or a bundle's NET.build.json into the same bundle.

Every bundle records how it was built (`compiler.driver.BuildRequest`, with the quantization
recipe of an int8 bundle), so a firmware repository's CI rebuilds the bundle a developer
exported from the window with `kiln compile MODEL --build NET.build.json -o DIR`, byte for
byte. What a CI job must notice (a budget exceeded, a layer left float in an int8 model) is a
warning, and `--strict` turns any warning into a failure before anything is written.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from app.cli.args import (
    UsageError,
    Warnings,
    add_model_args,
    add_pipeline_arg,
    add_profile_arg,
    add_strict_arg,
    add_target_args,
    parse_shape,
    pipeline_of,
    target_options,
    writable_folder,
)
from app.cli.tune import add_tuning_arg, own_schedules, with_tuning, within_flash
from compiler.codegen.bundle import weights_label
from compiler.errors import KilnError

# Options `--build` takes from the file: naming one as well is refused, not silently ignored.
_FROM_BUILD = {"target": None, "board": None, "board_file": None, "alignment": None,
               "disable_lowering": [], "pipeline": None, "requant": None, "name": "net",
               "weights": "embedded", "io_in_arena": False, "weight_layout": None,
               "profile": None, "shape": None, "tuning": None, "flash_budget": None}


def add_parser(sub) -> None:
    """The `compile` sub-command's arguments."""
    compile_ = sub.add_parser("compile", help="compile a model into a bundle (object, header, "
                                              "weights, report, example program)")
    add_model_args(compile_)
    add_target_args(compile_)
    add_pipeline_arg(compile_)
    compile_.add_argument("-o", "--output", required=True, metavar="DIR",
                          help="folder for the bundle")
    compile_.add_argument("--build", metavar="NET.build.json",
                          help="rebuild the bundle this build file (from any bundle) describes, "
                               "byte for byte: its target, board, layout and quantization "
                               "recipe; the other build options cannot be given with it")
    compile_.add_argument("--name", default="net", metavar="NET",
                          help="entry point and file name prefix, a C identifier (default net)")
    compile_.add_argument("--weights", choices=["embedded", "external"], default="embedded",
                          help="weights as read-only data inside NET.o (default), or in "
                               "NET.weights.bin (and NET.weights.h) for the caller to place")
    compile_.add_argument("--io-in-arena", action="store_true",
                          help="place inputs and outputs inside the activation arena so their "
                               "space is reused once dead")
    compile_.add_argument("--weight-layout", choices=["int8", "int16"],
                          help="int8 weights on DSP cores (Cortex-M4/M7/M33): int8 keeps them "
                               "as bytes widened in the kernel (half the flash), int16 stores "
                               "ready int16 pairs (fewer instructions); default: bytes where "
                               "pairs would take over a quarter of the core's usual flash or "
                               "not fit --board, else pairs")
    compile_.add_argument("--force", action="store_true",
                          help="write into a folder that holds another bundle (replaced) or "
                               "files that are not a bundle (kept beside it)")
    add_tuning_arg(compile_)
    compile_.add_argument("--flash-budget", type=int, metavar="BYTES",
                          help="with --tuning: per layer, the measured schedule that keeps the "
                               "network within this much flash with the fewest instructions "
                               "(default with --board: the board's flash)")
    compile_.add_argument("--json", action="store_true", help="print the report as JSON")
    add_strict_arg(compile_)
    add_profile_arg(compile_)


def build_request_of(args):
    """(BuildRequest, graph to compile) from the command line: the model, maybe quantized.

    With `--profile`, the recipe is that profile with `--method`, `--schema` and `--requant`.
    """
    from compiler.driver import BuildRequest
    from compiler.frontends.load import load_model
    from compiler.ir.hashing import graph_hash

    options, board = target_options(args)
    options = with_tuning(options, args.tuning, Warnings(args))
    shapes = dict(parse_shape(s) for s in args.shape or [])
    graph = load_model(args.model, shapes)
    pipeline = pipeline_of(args)
    recipe = None
    if args.profile:
        from compiler.quant.glow_yaml import read_profile
        from compiler.quant.recipe import QuantRecipe, quantize_with

        recipe = QuantRecipe.of_profile(read_profile(args.profile), graph, method=args.method,
                                        schema=args.schema, requant=args.requant or "tflite")
        compiled_graph = quantize_with(graph, recipe)
    else:
        compiled_graph = graph
    request = BuildRequest(options, board, None if pipeline is None else pipeline.to_json(),
                           None if recipe is None else recipe.to_json(portable=True), shapes,
                           graph_hash(graph))
    return request, compiled_graph, pipeline


def rebuild_request_of(args):
    """(BuildRequest, graph to compile, pipeline) of `--build`: the file's, checked."""
    from compiler.driver import read_build_file
    from compiler.frontends.load import load_model
    from compiler.ir.hashing import graph_hash
    from compiler.passes import Pipeline
    from compiler.version import kiln_version

    given = [f"--{k.replace('_', '-')}" for k, default in _FROM_BUILD.items()
             if getattr(args, k, default) not in (default, None, [])]
    if given:
        raise UsageError(f"--build takes every build option from its file; drop "
                         f"{', '.join(given)}")
    request, version = read_build_file(args.build)
    graph = load_model(args.model, dict(request.shapes))
    found = graph_hash(graph)
    if found != request.model_hash:
        raise KilnError(f"{args.build} is the build of another model (hash "
                        f"{request.model_hash}, {Path(args.model).name}'s is {found}): nothing "
                        "was written")
    if version != kiln_version():
        Warnings(args).note(f"{args.build} was written by Kiln {version}, this is "
                            f"{kiln_version()}: the bundle may differ")
    pipeline = None if request.pipeline is None else Pipeline.from_json(request.pipeline)
    if request.recipe is None:
        return request, graph, pipeline
    from compiler.quant.recipe import parse_recipe, quantize_with

    recipe = parse_recipe(request.recipe, f"{args.build}'s recipe")
    return request, quantize_with(graph, recipe), pipeline


def fallback_warnings(compiled, warnings: Warnings) -> None:
    """A warning per weighted layer an int8 model leaves in float, with its cost in bytes."""
    from compiler.driver import float_fallbacks

    for layer, weights in float_fallbacks(compiled):
        warnings.warn(f"layer {layer} stays float in this int8 model: {weights:,} B of float32 "
                      f"weights ({weights - weights // 4:,} B more than int8) and float "
                      "activations around it")


def budget_warnings(usage: dict, warnings: Warnings) -> None:
    """A warning per budget the bundle exceeds, and the hints on how to fit."""
    for label, key in (("flash", "flash"), ("RAM", "ram")):
        used, budget = usage[f"{key}_used"], usage[key]
        if used > budget:
            warnings.warn(f"{label} over the {usage['name']} budget by {used - budget:,} B "
                          f"({used:,} B used of {budget:,} B)")
    for hint in usage.get("hints", ()):
        warnings.hint(hint)


def print_budget(usage: dict) -> None:
    """The board's flash and RAM use as a table."""
    from rich.console import Console
    from rich.table import Table

    table = Table(f"{usage['name']}", "used", "budget", "use")
    for label, key in (("flash", "flash"), ("RAM", "ram")):
        used, budget = usage[f"{key}_used"], usage[key]
        table.add_row(label, f"{used:,} B", f"{budget:,} B", f"{100 * used / budget:.1f}%")
    Console().print(table)


def run(args) -> int:
    """`kiln compile`.

    A bundle over its board's budget is still written and the exit code stays 0 (it may be
    meant for a bigger part) unless `--strict`; the warning goes to stderr and `--json`
    carries `board.fits`. A folder holding another bundle, or files that are no bundle, is
    refused before any work unless --force; the same bundle (name and target) is simply
    rebuilt.
    """
    from compiler.codegen.bundle import report
    from compiler.codegen.bundle_folder import FolderInUse, check_folder
    from compiler.driver import compilation

    writable_folder(args.output)  # before any work
    request, graph, pipeline = (rebuild_request_of(args) if args.build
                                else build_request_of(args))
    options, board = request.options, request.board
    warnings = Warnings(args)
    try:
        check_folder(args.output, options.name, options.target, args.force,
                     example=not options.resolved_target().mcu)
        compiled = compilation(graph, pipeline)
        fallback_warnings(compiled, warnings)
        request = own_schedules(compiled, within_flash(args, compiled, request, warnings))
        options = request.options
        chosen, note = compiled.layout_that_fits(options, board)
        checked = report(compiled.net(chosen), board)  # the one report of this export
        if board is not None:
            budget_warnings(checked["board"], warnings)
        warnings.check()  # --strict: nothing is written
        paths, doc, note = compiled.export(args.output, request, force=args.force,
                                           report_doc=checked)
    except FolderInUse as exc:
        how = "replace it" if exc.kind == "bundle" else "write the bundle beside them"
        raise UsageError(f"{exc}; pass --force to {how}") from None
    except OSError as exc:
        raise UsageError(f"cannot write the bundle to {args.output}: {exc.strerror}") from None
    if note:
        warnings.note(note)
    net = compiled.net(chosen)
    if args.json:
        print(json.dumps({**doc, "warnings": warnings.lines}))
        return 0
    s = doc["sections"]
    warnings.say(
        f"{Path(args.model).name} -> {net.target.name} ({net.target.triple}), weights "
        f"{weights_label(doc)}: text {s['text']:,} B, rodata "
        f"{s['rodata']:,} B, data {s['data']:,} B, bss {s['bss']:,} B; constant "
        f"{doc['regions']['constant']:,} B, mutable {net.plan.mutable:,} B{state_note(doc)}, "
        f"activations {net.plan.arena.size:,} B")
    for path in paths:
        warnings.say(f"  wrote {path}")
    if any(path.name == "README.md" for path in paths):  # a Cortex-M bundle's firmware
        warnings.say(f"  build and run it under QEMU as its README.md says: cd "
                     f"{shlex.quote(str(args.output))} && make run")
    if board is not None and not warnings.quiet:
        print_budget(doc["board"])
    return 0


def state_note(doc: dict) -> str:
    """The summary line's note on the state a network keeps between inferences, if any."""
    state = doc["regions"].get("state", 0)
    return f" (state {state:,} B kept between inferences)" if state else ""
